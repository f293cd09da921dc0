#include "sluice/exec/pipeline.h"

#include "sluice/core/status_macros.h"

namespace sluice::exec {
namespace {

// Chunk size for pipelines without a batch node: large enough to amortize
// per-chunk work, small enough to keep the first sample quick.
constexpr int64_t kDefaultChunkRows = 128;

}  // namespace

PipelineIterator::~PipelineIterator() {
  ctx_->cancel.Cancel();
  root_.reset();
}

absl::Status PipelineIterator::Next(Batch* out, bool* end) {
  if (batched_) return root_->GetNext(out, end);
  if (next_row_ >= chunk_.rows) {
    SLUICE_RETURN_IF_ERROR(root_->GetNext(&chunk_, end));
    next_row_ = 0;
    if (*end) return absl::OkStatus();
  }
  *end = false;
  *out = chunk_.Slice(next_row_, next_row_ + 1);
  ++next_row_;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const PipelineDef& def) {
  SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline compiled, graph::Compile(def));
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(compiled)));
}

Pipeline::Pipeline(graph::CompiledPipeline compiled) : compiled_(std::move(compiled)) {
  // Sources cut chunks of the batch size, so batches pass through with no
  // copy when nothing in between changes row counts.
  chunk_rows_ = kDefaultChunkRows;
  for (const graph::CompiledNode& node : compiled_.nodes) {
    if (node.kind == graph::NodeKind::kBatch) chunk_rows_ = node.count;
  }
}

std::unique_ptr<Iterator> Pipeline::MakeIterator(ExecContext* ctx, size_t index,
                                                 uint64_t epoch) const {
  const graph::CompiledNode& node = compiled_.nodes[index];
  const IteratorArgs args{ctx, &node, epoch, chunk_rows_};
  if (node.kind == graph::NodeKind::kSource) return MakeSourceIterator(args);
  if (node.kind == graph::NodeKind::kRepeat) {
    return MakeRepeatIterator(
        args, [this, ctx, index](uint64_t e) { return MakeIterator(ctx, index - 1, e); });
  }
  std::unique_ptr<Iterator> input = MakeIterator(ctx, index - 1, epoch);
  switch (node.kind) {
    case graph::NodeKind::kMap:
      return MakeMapIterator(args, std::move(input));
    case graph::NodeKind::kFilter:
      return MakeFilterIterator(args, std::move(input));
    case graph::NodeKind::kShuffle:
      return MakeShuffleIterator(args, std::move(input));
    case graph::NodeKind::kBatch:
      return MakeBatchIterator(args, std::move(input));
    case graph::NodeKind::kPrefetch:
      return MakePrefetchIterator(args, std::move(input));
    case graph::NodeKind::kTake:
      return MakeTakeIterator(args, std::move(input));
    case graph::NodeKind::kSource:
    case graph::NodeKind::kRepeat:
      break;
  }
  return input;
}

std::unique_ptr<PipelineIterator> Pipeline::Iterate(uint64_t epoch) const {
  auto ctx = std::make_unique<ExecContext>(compiled_.seed, compiled_.threads,
                                           compiled_.memory_budget_bytes, compiled_.ordered);
  ExecContext* raw = ctx.get();
  std::unique_ptr<PipelineIterator> it(new PipelineIterator(std::move(ctx), compiled_.batched()));
  it->root_ = MakeIterator(raw, compiled_.nodes.size() - 1, epoch);
  return it;
}

}  // namespace sluice::exec
