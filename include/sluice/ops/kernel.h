// What an op's kernel implements, per backend: a setup once per instance,
// then runs on tiles of rows.
#ifndef SLUICE_OPS_KERNEL_H_
#define SLUICE_OPS_KERNEL_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "sluice/core/batch.h"
#include "sluice/core/core_share.h"
#include "sluice/core/rng.h"

namespace sluice::ops {

// Where a kernel runs. A map node names its backend (MapDef.device).
enum class Backend { kCpu, kCuda };

absl::string_view BackendName(Backend backend);
// InvalidArgument naming the allowed values unless `name` is "cpu" or "cuda".
absl::StatusOr<Backend> ParseBackend(absl::string_view name);

// One column as a kernel sees it for a tile: dense rows at `data`, each
// `row_bytes` long; for a ragged input, rows of `ragged` from `ragged_row`
// on; for variable-length bytes an earlier op of the chain produced, one
// view per row at `views` (a kernel producing such a column sets them, and
// they must point into its inputs). On the cuda backend `data` is device
// memory; ragged and view columns exist on the host only.
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
  absl::string_view bytes(int64_t r) const { return views != nullptr ? views[r] : ragged->RaggedRow(ragged_row + r); }
};

// A run of consecutive rows, the backend they are on, and what a kernel
// needs to know about them.
struct KernelContext {
  Backend backend = Backend::kCpu;
  // cuda: the device ordinal, and the cudaStream_t every launch and copy of
  // this run goes on (kernels never synchronize it; the executor does).
  int device = -1;
  void* stream = nullptr;

  int64_t rows = 0;
  // The outputs are written once and read much later (a batch as it is
  // received): kernels writing them in plain loops may store past the
  // caches (non-temporal stores), which saves reading the lines first.
  bool bypass_cache = false;
  // Position of row 0 in the node's input stream this epoch; keys
  // randomness only for rows of unknown origin.
  int64_t first_sample = 0;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t op_key = 0;  // set per op by the executor
  const Provenance* provenance = nullptr;
  int64_t provenance_row = 0;  // row 0's row in *provenance
  // True once the run is torn down: a kernel waiting on something outside
  // the engine (a Python process running the user's code) stops waiting.
  const std::atomic<bool>* cancelled = nullptr;
  // The thread's share of the engine's cores, which a kernel waiting on
  // work outside the engine lends for the wait; null where there is none
  // to lend (a caller outside the executor).
  CoreShare* core = nullptr;
  // Rows such a kernel has begun outside the engine (a Python op's process,
  // row by row): a service worker reports them as its split's progress
  // while the run goes on. May be null.
  std::atomic<int64_t>* progress = nullptr;

  // Row r's draws for this op, keyed by the sample's identity (file and
  // record), so a sample gets the same draws whatever its position: with
  // any thread count, in unordered mode, after a shuffle, on any worker,
  // on either backend.
  SampleRng Rng(int64_t r) const { return RngFor(op_key, r); }
  SampleRng RngFor(uint64_t key, int64_t r) const;
  // "record 17 of /d/a.tfrecord" for row r.
  std::string Where(int64_t r) const;
};

// What a kernel learns once, before its first run.
struct SetupContext {
  Backend backend = Backend::kCpu;
  int device = -1;  // cuda: the device its runs will be on
};

// One instance per op of a pipeline, made from the op's params by the
// factory registered for its backend. Setup runs once, before any Run;
// then Run is called concurrently on disjoint tiles, so it is const.
// Per-run scratch memory is thread_local inside the kernel (allocated once
// per thread, never per call); per-instance state (tables, device
// constants) is made in Setup.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual absl::Status Setup(const SetupContext& ctx) { return absl::OkStatus(); }
  virtual absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                           absl::Span<const ColumnRef> out) const = 0;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_KERNEL_H_
