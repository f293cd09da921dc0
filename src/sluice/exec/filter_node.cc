// Filter node: evaluates the predicate on each input chunk and keeps the
// rows it accepts (copied into a compact chunk; empty chunks are skipped).
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/map_plan.h"
#include "sluice/exec/row_copier.h"

namespace sluice::exec {
namespace {

class FilterIterator : public Iterator {
 public:
  FilterIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input)
      : ctx_(args.ctx),
        pool_(args.output_pool()),
        node_(*args.node),
        epoch_(args.epoch),
        predicate_(MapPlan::Make(node_)),
        input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    while (true) {
      Batch in;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&in, end));
      if (*end) return absl::OkStatus();
      CpuToken token(&ctx_->cpu);
      if (!token.held()) return absl::CancelledError("pipeline cancelled");
      Batch mask;
      MapPlan::RunArgs run{ctx_->seed, epoch_, next_sample_, pool_, nullptr, nullptr, ctx_->cancel.flag()};
      next_sample_ += in.rows;
      absl::Status s = predicate_->Run(in, run, &mask);
      if (!s.ok()) return WithContext(s, absl::StrCat("node '", node_.name, "'"));
      const uint8_t* keep = mask.columns.back().values.data<uint8_t>();
      RowCopier copier(node_.output_schema, in.rows, pool_);
      for (int64_t r = 0; r < in.rows;) {  // copy runs of kept rows
        if (!keep[r]) {
          int64_t e = r;
          while (e < in.rows && !keep[e]) ++e;
          if (ctx_->ledger != nullptr) SLUICE_RETURN_IF_ERROR(ctx_->ledger->Done(in.provenance, r, e));
          r = e;
          continue;
        }
        int64_t e = r;
        while (e < in.rows && keep[e]) ++e;
        copier.Append(in, r, e);
        r = e;
      }
      if (copier.rows() > 0) {
        *out = copier.Finish();
        return absl::OkStatus();
      }
    }
  }

 private:
  ExecContext* ctx_;
  BufferPool* pool_;
  const graph::CompiledNode& node_;
  const uint64_t epoch_;
  std::unique_ptr<MapPlan> predicate_;
  std::unique_ptr<Iterator> input_;
  int64_t next_sample_ = 0;
};

}  // namespace

std::unique_ptr<Iterator> MakeFilterIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<FilterIterator>(args, std::move(input));
}

}  // namespace sluice::exec
