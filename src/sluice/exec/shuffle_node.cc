// Shuffle node: a buffer of `buffer_size` rows; each output row is drawn
// uniformly from the buffer and replaced by the next input row, as
// tf.data's shuffle. The draws are keyed by (seed, node, epoch, position),
// so every epoch has its own order and a seed reproduces it.
#include <memory>
#include <utility>
#include <vector>

#include "sluice/core/rng.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/row_copier.h"

namespace sluice::exec {
namespace {

class ShuffleIterator : public Iterator {
 public:
  ShuffleIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input)
      : ctx_(args.ctx),
        pool_(args.output_pool()),
        node_(*args.node),
        epoch_(args.epoch),
        chunk_rows_(args.chunk_rows),
        key_(OpKey(node_.name, 0)),
        input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    SLUICE_RETURN_IF_ERROR(Fill());
    if (buffer_.empty()) {
      *end = true;
      return absl::OkStatus();
    }
    CpuToken token(&ctx_->cpu);
    if (!token.held()) return absl::CancelledError("pipeline cancelled");
    RowCopier copier(node_.output_schema, chunk_rows_, pool_);
    while (copier.rows() < chunk_rows_ && !buffer_.empty()) {
      SampleRng rng(ctx_->seed, key_, epoch_, emitted_++);
      const size_t i = rng.NextU32() % buffer_.size();
      copier.Append(*buffer_[i].first, buffer_[i].second, buffer_[i].second + 1);
      buffer_[i] = std::move(buffer_.back());
      buffer_.pop_back();
      if (buffer_.size() < static_cast<size_t>(node_.count) && !input_end_) {
        SLUICE_RETURN_IF_ERROR(Fill());
      }
    }
    *end = false;
    *out = copier.Finish();
    return absl::OkStatus();
  }

 private:
  // Tops the buffer up to buffer_size rows (or the end of the input).
  absl::Status Fill() {
    while (!input_end_ && buffer_.size() < static_cast<size_t>(node_.count)) {
      auto chunk = std::make_shared<Batch>();
      SLUICE_RETURN_IF_ERROR(input_->GetNext(chunk.get(), &input_end_));
      if (input_end_) break;
      for (int64_t r = 0; r < chunk->rows; ++r) buffer_.emplace_back(chunk, r);
    }
    return absl::OkStatus();
  }

  ExecContext* ctx_;
  BufferPool* pool_;
  const graph::CompiledNode& node_;
  const uint64_t epoch_;
  const int64_t chunk_rows_;
  const uint64_t key_;
  std::unique_ptr<Iterator> input_;
  bool input_end_ = false;
  // Rows waiting to be drawn, by the chunk that holds them.
  std::vector<std::pair<std::shared_ptr<const Batch>, int64_t>> buffer_;
  int64_t emitted_ = 0;
};

}  // namespace

std::unique_ptr<Iterator> MakeShuffleIterator(const IteratorArgs& args,
                                              std::unique_ptr<Iterator> input) {
  return std::make_unique<ShuffleIterator>(args, std::move(input));
}

}  // namespace sluice::exec
