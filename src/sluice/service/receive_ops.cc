#include "sluice/service/receive_ops.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"

namespace sluice::service {

absl::Status ReceiveOp::Run(const uint8_t* in, int64_t rows, uint8_t* dst) const {
  ops::KernelContext ctx;
  ctx.rows = rows;
  ctx.bypass_cache = true;  // the batch is read next by its consumer, long after
  const ops::ColumnRef input{const_cast<uint8_t*>(in), in_row_bytes};
  const ops::ColumnRef output{dst, out_row_bytes};
  absl::Status s = op->kernel->Run(ctx, {&input, 1}, {&output, 1});
  if (!s.ok()) return WithContext(s, absl::StrCat("op '", op->name, "' on column '", out.name, "' as received"));
  return absl::OkStatus();
}

ReceiveOps::ReceiveOps(const graph::CompiledNode& remote, const Schema& wire) : by_column_(wire.columns().size()) {
  for (const graph::BoundOp& op : remote.ops) {
    const int column = op.inferred.inputs[0];
    ReceiveOp& r = by_column_[static_cast<size_t>(column)];
    r.op = &op;
    r.out = op.inferred.outputs[0];
    r.in_row_bytes = wire.column(column).row_bytes();
    r.out_row_bytes = r.out.row_bytes();
  }
}

const ReceiveOp* ReceiveOps::For(int column) const {
  if (column < 0 || static_cast<size_t>(column) >= by_column_.size()) return nullptr;
  const ReceiveOp& r = by_column_[static_cast<size_t>(column)];
  return r.op != nullptr ? &r : nullptr;
}

absl::Status ReceiveRows::Feed(const uint8_t* piece, int64_t size) {
  const int64_t row = op_.in_row_bytes;
  if (carried_ > 0) {  // finish the row the last piece began
    const int64_t n = std::min(size, row - carried_);
    std::memcpy(carry_.data() + carried_, piece, static_cast<size_t>(n));
    carried_ += n;
    piece += n;
    size -= n;
    if (carried_ < row) return absl::OkStatus();
    SLUICE_RETURN_IF_ERROR(op_.Run(carry_.data(), 1, out_));
    out_ += op_.out_row_bytes;
    carried_ = 0;
  }
  const int64_t rows = size / row;
  if (rows > 0) {
    SLUICE_RETURN_IF_ERROR(op_.Run(piece, rows, out_));
    out_ += rows * op_.out_row_bytes;
  }
  carried_ = size - rows * row;
  std::memcpy(carry_.data(), piece + rows * row, static_cast<size_t>(carried_));
  return absl::OkStatus();
}

}  // namespace sluice::service
