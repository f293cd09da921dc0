// The public Pipeline and Iterator over the placed pipeline, which runs
// the engine (exec) in this process and a distribute node's part on the
// service, where the definition or `placement: "auto"` puts it.
#include "sluice/pipeline.h"

#include "pipeline.pb.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/placement/pipeline_metrics.h"
#include "sluice/placement/placed_pipeline.h"

namespace sluice {
Iterator::Iterator(std::unique_ptr<placement::PlacedIterator> it) : it_(std::move(it)) {}
Iterator::Iterator(Iterator&&) noexcept = default;
Iterator& Iterator::operator=(Iterator&&) noexcept = default;
Iterator::~Iterator() = default;

namespace {

absl::Status MovedFrom() {
  return absl::FailedPreconditionError("this sluice::Iterator was moved from: use the one it was moved to");
}

}  // namespace

absl::Status Iterator::Next(Batch* out, bool* end) { return it_ ? it_->Next(out, end) : MovedFrom(); }
void Iterator::Cancel() {
  if (it_) it_->Cancel();
}
int64_t Iterator::skipped() const { return it_ ? it_->skipped() : 0; }
std::string Iterator::skip_summary() const { return it_ ? it_->skip_summary() : ""; }
absl::StatusOr<std::string> Iterator::SaveState() const { return it_ ? it_->SaveState() : MovedFrom(); }

absl::StatusOr<Pipeline> Pipeline::FromJson(const std::string& json) {
  absl::StatusOr<PipelineDef> def = graph::PipelineFromJson(json);
  if (!def.ok()) return def.status();
  return FromDef(*def);
}

absl::StatusOr<Pipeline> Pipeline::FromFile(const std::string& path) {
  absl::StatusOr<PipelineDef> def = graph::PipelineFromJsonFile(path);
  if (!def.ok()) return def.status();
  absl::StatusOr<Pipeline> pipeline = FromDef(*def);
  if (!pipeline.ok()) return WithContext(pipeline.status(), path);
  return pipeline;
}

absl::StatusOr<Pipeline> Pipeline::FromBuilder(const PipelineBuilder& builder) { return FromDef(builder.Build()); }

absl::StatusOr<Pipeline> Pipeline::FromDef(const PipelineDef& def) {
  absl::StatusOr<std::shared_ptr<placement::PlacedPipeline>> impl = placement::PlacedPipeline::Create(def);
  if (!impl.ok()) return impl.status();
  return Pipeline(*std::move(impl));
}

const Schema& Pipeline::output_schema() const { return impl_->first().output_schema(); }
bool Pipeline::batched() const { return impl_->first().batched(); }
int64_t Pipeline::Cardinality() const { return impl_->first().Cardinality(); }

Iterator Pipeline::Iterate(uint64_t epoch) const { return Iterator(impl_->Iterate(epoch)); }

absl::StatusOr<Iterator> Pipeline::Resume(const std::string& state) const {
  absl::StatusOr<std::unique_ptr<placement::PlacedIterator>> it = impl_->Resume(state);
  if (!it.ok()) return it.status();
  return Iterator(*std::move(it));
}

std::string Pipeline::PlacementReport() const { return impl_->report().ToJson(); }

absl::StatusOr<int> ServeMetrics(const std::string& host, int port) {
  return placement::ServePipelineMetrics(host, port);
}

}  // namespace sluice
