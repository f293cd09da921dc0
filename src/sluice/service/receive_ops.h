// The elementwise ops a client runs on columns as their bytes arrive
// (graph/fold_receive.h): looked up per wire column by the batch parser,
// which feeds each column to its op in the pieces gRPC hands over.
#ifndef SLUICE_SERVICE_RECEIVE_OPS_H_
#define SLUICE_SERVICE_RECEIVE_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "sluice/core/schema.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::service {

// One column's op.
struct ReceiveOp {
  const graph::BoundOp* op = nullptr;  // its kernel set up (exec::PrepareKernels)
  ColumnSpec out;                      // the column it writes
  int64_t in_row_bytes = 0;            // a row as sent
  int64_t out_row_bytes = 0;           // a row as written

  // Runs the op on `rows` whole rows.
  absl::Status Run(const uint8_t* in, int64_t rows, uint8_t* out) const;
};

class ReceiveOps {
 public:
  ReceiveOps() = default;
  // The ops of `remote` (a kRemote node whose kernels are set up), against
  // `wire`, the schema the workers send. REQUIRES: `remote` outlives this.
  ReceiveOps(const graph::CompiledNode& remote, const Schema& wire);

  // Column `column`'s op, or null.
  const ReceiveOp* For(int column) const;

 private:
  std::vector<ReceiveOp> by_column_;  // op == nullptr: none
};

// Feeds one column's bytes to its op in pieces of any size: whole rows run
// straight from each piece (hot in cache, never stored in the wire dtype);
// a row split between pieces is carried in a buffer of one row.
class ReceiveRows {
 public:
  ReceiveRows(const ReceiveOp& op, uint8_t* out) : op_(op), out_(out), carry_(op.in_row_bytes) {}
  absl::Status Feed(const uint8_t* piece, int64_t size);
  // Every byte fed belonged to a whole row.
  bool complete() const { return carried_ == 0; }

 private:
  const ReceiveOp& op_;
  uint8_t* out_;  // the next row's output
  std::vector<uint8_t> carry_;
  int64_t carried_ = 0;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_RECEIVE_OPS_H_
