// The interface every op implementation provides: run on a tile of rows.
#ifndef SLUICE_OPS_KERNEL_H_
#define SLUICE_OPS_KERNEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "sluice/core/batch.h"
#include "sluice/core/rng.h"

namespace sluice::ops {

// One column as a kernel sees it for a tile: dense rows at `data`, each
// `row_bytes` long; for a ragged input, rows of `ragged` from `ragged_row`
// on; for variable-length bytes an earlier op of the chain produced, one
// view per row at `views` (a kernel producing such a column sets them, and
// they must point into its inputs).
struct ColumnRef {
  uint8_t* data = nullptr;
  int64_t row_bytes = 0;
  const Column* ragged = nullptr;
  int64_t ragged_row = 0;
  absl::string_view* views = nullptr;

  template <typename T>
  T* row(int64_t r) const {
    return reinterpret_cast<T*>(data + r * row_bytes);
  }
  absl::string_view bytes(int64_t r) const {
    return views != nullptr ? views[r] : ragged->RaggedRow(ragged_row + r);
  }
};

// A run of consecutive rows, and what a kernel needs to know about them.
struct TileContext {
  int64_t rows = 0;
  // Position of row 0 in the node's input stream this epoch; keys
  // randomness only for rows of unknown origin.
  int64_t first_sample = 0;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t op_key = 0;  // set per op by the executor
  const Provenance* provenance = nullptr;
  int64_t provenance_row = 0;  // row 0's row in *provenance

  // Row r's draws for this op, keyed by the sample's identity (file and
  // record), so a sample gets the same draws whatever its position: with
  // any thread count, in unordered mode, after a shuffle, on any worker.
  SampleRng Rng(int64_t r) const { return RngFor(op_key, r); }
  SampleRng RngFor(uint64_t key, int64_t r) const;
  // "record 17 of /d/a.tfrecord" for row r.
  std::string Where(int64_t r) const;
};

// Kernels are immutable after creation and called concurrently on disjoint
// tiles, so Run is const. Scratch memory is thread_local inside the kernel
// (allocated once per thread, never per call).
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                           absl::Span<const ColumnRef> out) const = 0;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_KERNEL_H_
