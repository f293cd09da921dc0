// Shuffle node: a buffer of `buffer_size` rows; each output row is drawn
// uniformly from the buffer and its slot takes the next input row, as
// tf.data's shuffle. The draws are keyed by (seed, node, epoch, draw), so
// every epoch has its own order, a seed reproduces it, and the order does
// not depend on how the input was cut into chunks (which makes the position
// savable: shuffle_state.h). The buffer holds rows, not the chunks they
// came in: once the chunks it keeps alive hold more than three times its
// rows, the rows of chunks mostly drawn already are copied into dense
// chunks, so a buffer of N rows costs a few N rows, not N chunks; at the
// memory budget, once they hold 3/2 of its rows, and under 4/3 after.
#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/row_copier.h"
#include "sluice/exec/shuffle_state.h"

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
        log_(ctx_->shuffle_log.get()),
        input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    if (!started_) {
      // resume_buffer is set when the state was saved after draws; one
      // saved before the first draw is the epoch's start.
      const EpochPosition* resume = ctx_->ResumeOf(epoch_);
      const bool restore = resume != nullptr && ctx_->resume_buffer;
      SLUICE_RETURN_IF_ERROR(restore ? Restore(*resume->shuffle, *ctx_->resume_buffer) : Fill());
      compact_above_ = 3 * static_cast<int64_t>(buffer_.size()) + chunk_rows_;
      started_ = true;
    }
    if (buffer_.empty()) {
      *end = true;
      return absl::OkStatus();
    }
    std::optional<CpuToken> token(&ctx_->cpu);
    if (!token->held()) return absl::CancelledError("pipeline cancelled");
    RowCopier copier(node_.output_schema, chunk_rows_, pool_);
    std::vector<ShuffleMark> marks;
    while (copier.rows() < chunk_rows_ && !buffer_.empty()) {
      const size_t i = ShuffleDraw(ctx_->seed, key_, epoch_, emitted_++, buffer_.size());
      Row& row = buffer_[i];
      copier.Append(*row.chunk, row.row, row.row + 1);
      Leave(row);
      if (log_ != nullptr) {
        held_.Release(row.index);
        marks.push_back(ShuffleMark{epoch_, row.chunk->provenance.SampleId(row.row), {}, {}});
      }
      if (!PendingLeft() && !input_end_) {  // never wait on the input holding a token
        token.reset();
        SLUICE_RETURN_IF_ERROR(Pull());
        token.emplace(&ctx_->cpu);
        if (!token->held()) return absl::CancelledError("pipeline cancelled");
      }
      if (PendingLeft()) {
        row = TakePending();
        Enter(row);
        if (log_ != nullptr) held_.Add(row.chunk->provenance.Origin(row.row), true);
      } else {
        row = std::move(buffer_.back());
        buffer_.pop_back();
      }
      if (log_ != nullptr) {
        marks.back().position = ShufflePosition{emitted_, held_.oldest(), input_end_ ? next_index_ : -1};
        marks.back().oldest_origin = held_.oldest_origin();
      }
    }
    if (log_ != nullptr) log_->Add(marks);
    *end = false;
    *out = copier.Finish();
    if (chunk_rows_held_ > compact_above_) {
      Compact(1, 2);
    } else if (chunk_rows_held_ > 3 * static_cast<int64_t>(buffer_.size()) / 2 + chunk_rows_ &&
               ctx_->memory.Tight(static_cast<int64_t>(out->ByteSize()))) {
      Compact(3, 4);  // at the budget: memory before the copies' cost
    }
    return absl::OkStatus();
  }

 private:
  struct Row {
    std::shared_ptr<const Batch> chunk;
    int64_t row = 0;
    int64_t index = 0;  // in the input, from 0 at the epoch's start
  };

  bool PendingLeft() const { return pending_ != nullptr && pending_row_ < pending_->rows; }

  // Reads the next non-empty input chunk into pending_, or sets input_end_.
  absl::Status Pull() {
    while (!input_end_ && !PendingLeft()) {
      auto chunk = std::make_shared<Batch>();
      SLUICE_RETURN_IF_ERROR(input_->GetNext(chunk.get(), &input_end_));
      pending_ = std::move(chunk);
      pending_row_ = 0;
    }
    return absl::OkStatus();
  }

  Row TakePending() { return Row{pending_, pending_row_++, next_index_++}; }

  // A row came into the buffer, or left it: counts the rows of the chunks
  // the buffer keeps alive.
  void Enter(const Row& row) {
    if (live_[row.chunk.get()]++ == 0) chunk_rows_held_ += row.chunk->rows;
  }
  void Leave(const Row& row) {
    auto it = live_.find(row.chunk.get());
    if (--it->second > 0) return;
    chunk_rows_held_ -= row.chunk->rows;
    live_.erase(it);
  }

  // Copies the rows of chunks that keep fewer than num/den of their rows
  // in the buffer into dense chunks of chunk_rows_, letting go of those
  // chunk by chunk; the next compaction waits until the chunks held grow by
  // the buffer's size again, so at 1/2 no row is copied more than about
  // once (at 3/4, about three times, and the chunks hold under 4/3 of the
  // buffer's rows).
  void Compact(int64_t num, int64_t den) {
    std::vector<size_t> sparse;
    for (size_t i = 0; i < buffer_.size(); ++i) {
      if (live_[buffer_[i].chunk.get()] * den < buffer_[i].chunk->rows * num) sparse.push_back(i);
    }
    // A chunk's rows together: each chunk is let go as soon as its rows
    // are copied, not after all the copies are made.
    std::stable_sort(sparse.begin(), sparse.end(),
                     [&](size_t a, size_t b) { return buffer_[a].chunk.get() < buffer_[b].chunk.get(); });
    for (size_t first = 0; first < sparse.size(); first += chunk_rows_) {
      const size_t last = std::min(sparse.size(), first + static_cast<size_t>(chunk_rows_));
      RowCopier copier(node_.input_schema, static_cast<int64_t>(last - first), pool_);
      for (size_t k = first; k < last; ++k) {
        const Row& row = buffer_[sparse[k]];
        copier.Append(*row.chunk, row.row, row.row + 1);
      }
      auto dense = std::make_shared<const Batch>(copier.Finish());
      for (size_t k = first; k < last; ++k) {
        Row& row = buffer_[sparse[k]];
        Leave(row);
        row.chunk = dense;
        row.row = static_cast<int64_t>(k - first);
        Enter(row);
      }
    }
    compact_above_ = std::max(2 * static_cast<int64_t>(buffer_.size()), chunk_rows_held_) +
                     static_cast<int64_t>(buffer_.size()) + chunk_rows_;
  }

  // The epoch's first buffer_size rows.
  absl::Status Fill() {
    while (static_cast<int64_t>(buffer_.size()) < node_.count) {
      SLUICE_RETURN_IF_ERROR(Pull());
      if (!PendingLeft()) break;
      buffer_.push_back(TakePending());
      Enter(buffer_.back());
      if (log_ != nullptr) held_.Add(buffer_.back().chunk->provenance.Origin(buffer_.back().row), true);
    }
    return absl::OkStatus();
  }

  // The buffer as it stood after p.emitted draws (`replay`). The input
  // starts at the oldest row the buffer held then (the resumed source
  // starts there); the rows drawn before are read again and passed over,
  // or, when the source selects, never reach here.
  absl::Status Restore(const ShufflePosition& p, const ShuffleReplay& replay) {
    // (input row, slot), in the order the rows are read again.
    std::vector<std::pair<int64_t, size_t>> wanted;
    for (size_t i = 0; i < replay.slots.size(); ++i) wanted.emplace_back(replay.slots[i], i);
    std::sort(wanted.begin(), wanted.end());
    if (!wanted.empty() && wanted.front().first != p.oldest) {
      return absl::InvalidArgumentError(absl::StrCat("shuffle '", node_.name, "': the state's oldest buffered row (",
                                                     p.oldest,
                                                     ") is not the one its draws leave (the state was "
                                                     "altered, or saved by another shuffle)"));
    }
    const bool selected = ctx_->resume_selection.has_value();
    buffer_.resize(wanted.size());
    next_index_ = p.oldest;
    held_.Reset(p.oldest);
    auto want = wanted.begin();
    while (selected ? want != wanted.end() : next_index_ < replay.next) {
      if (selected) PassOver(want->first);
      SLUICE_RETURN_IF_ERROR(Pull());
      if (!PendingLeft()) {
        return absl::DataLossError(absl::StrCat("shuffle '", node_.name, "': the input ended at row ", next_index_,
                                                " but the saved buffer holds rows up to ", replay.next - 1,
                                                " (did the files change since the state was saved?)"));
      }
      const Row row = TakePending();
      const bool held = want != wanted.end() && want->first == row.index;
      if (log_ != nullptr) held_.Add(row.chunk->provenance.Origin(row.row), held);
      if (held) {
        buffer_[want->second] = row;
        Enter(row);
        ++want;
      }
    }
    PassOver(replay.next);
    emitted_ = p.emitted;
    return absl::OkStatus();
  }

  // Moves the input's numbering to `row`, past rows the source passed over.
  void PassOver(int64_t row) {
    for (; next_index_ < row; ++next_index_) {
      if (log_ != nullptr) held_.Add(RowOrigin{}, false);
    }
  }

  ExecContext* ctx_;
  BufferPool* pool_;
  const graph::CompiledNode& node_;
  const uint64_t epoch_;
  const int64_t chunk_rows_;
  const uint64_t key_;
  ShuffleLog* const log_;  // null when the position is not tracked
  std::unique_ptr<Iterator> input_;
  bool started_ = false;
  bool input_end_ = false;
  // The input chunk being taken into the buffer, row by row.
  std::shared_ptr<const Batch> pending_;
  int64_t pending_row_ = 0;
  int64_t next_index_ = 0;  // of the next input row
  std::vector<Row> buffer_;
  // Rows of each chunk still in buffer_, and all the rows of those chunks.
  std::unordered_map<const Batch*, int64_t> live_;
  int64_t chunk_rows_held_ = 0;
  int64_t compact_above_ = 0;  // chunk_rows_held_ past which to compact
  int64_t emitted_ = 0;
  HeldRows held_;  // tracked with log_
};

}  // namespace

std::unique_ptr<Iterator> MakeShuffleIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<ShuffleIterator>(args, std::move(input));
}

}  // namespace sluice::exec
