// The public Pipeline and Iterator over the engine's (exec) and the
// service's entry point, which runs a distribute node's part remotely.
#include "sluice/pipeline.h"

#include "pipeline.pb.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/service/distributed_pipeline.h"

namespace sluice {
namespace {

absl::StatusOr<std::shared_ptr<const exec::Pipeline>> Create(const PipelineDef& def) {
  absl::StatusOr<std::unique_ptr<exec::Pipeline>> pipeline = service::CreatePipeline(def);
  if (!pipeline.ok()) return pipeline.status();
  return std::shared_ptr<const exec::Pipeline>(*std::move(pipeline));
}

}  // namespace

Iterator::Iterator(std::shared_ptr<const exec::Pipeline> pipeline, std::unique_ptr<exec::PipelineIterator> it)
    : pipeline_(std::move(pipeline)), it_(std::move(it)) {}
Iterator::Iterator(Iterator&&) noexcept = default;
Iterator& Iterator::operator=(Iterator&&) noexcept = default;
Iterator::~Iterator() = default;

absl::Status Iterator::Next(Batch* out, bool* end) { return it_->Next(out, end); }
void Iterator::Cancel() { it_->Cancel(); }
int64_t Iterator::skipped() const { return it_->skipped().skipped(); }
std::string Iterator::skip_summary() const { return it_->skipped().Summary(); }

absl::StatusOr<Pipeline> Pipeline::FromJson(const std::string& json) {
  absl::StatusOr<PipelineDef> def = graph::PipelineFromJson(json);
  if (!def.ok()) return def.status();
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> impl = Create(*def);
  if (!impl.ok()) return impl.status();
  return Pipeline(*std::move(impl));
}

absl::StatusOr<Pipeline> Pipeline::FromFile(const std::string& path) {
  absl::StatusOr<PipelineDef> def = graph::PipelineFromJsonFile(path);
  if (!def.ok()) return def.status();
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> impl = Create(*def);
  if (!impl.ok()) return WithContext(impl.status(), path);
  return Pipeline(*std::move(impl));
}

absl::StatusOr<Pipeline> Pipeline::FromBuilder(const PipelineBuilder& builder) {
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> impl = Create(builder.Build());
  if (!impl.ok()) return impl.status();
  return Pipeline(*std::move(impl));
}

const Schema& Pipeline::output_schema() const { return impl_->output_schema(); }
bool Pipeline::batched() const { return impl_->batched(); }
int64_t Pipeline::Cardinality() const { return impl_->Cardinality(); }

Iterator Pipeline::Iterate(uint64_t epoch) const { return Iterator(impl_, impl_->Iterate(epoch)); }

}  // namespace sluice
