#include "sluice/service/element_spec.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::service {

graph::ResourceLimits FromProto(const ResourceLimitsProto& limits) {
  graph::ResourceLimits out;  // a field left 0 keeps its default
  if (limits.max_batch_bytes() > 0) out.max_batch_bytes = limits.max_batch_bytes();
  if (limits.max_buffer_bytes() > 0) out.max_buffer_bytes = limits.max_buffer_bytes();
  if (limits.max_threads() > 0) out.max_threads = limits.max_threads();
  return out;
}

ResourceLimitsProto ToProto(const graph::ResourceLimits& limits) {
  ResourceLimitsProto out;
  out.set_max_batch_bytes(limits.max_batch_bytes);
  out.set_max_buffer_bytes(limits.max_buffer_bytes);
  out.set_max_threads(limits.max_threads);
  return out;
}

absl::StatusOr<ElementSpec> DescribeElements(const PipelineDef& def, const graph::ResourceLimits& limits) {
  SLUICE_ASSIGN_OR_RETURN(const int distribute, graph::FindDistribute(def));
  if (distribute >= 0) {
    return absl::InvalidArgumentError("register the nodes before the distribute node, not the whole pipeline");
  }
  SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline compiled, graph::Compile(def));
  SLUICE_RETURN_IF_ERROR(graph::CheckResourceLimits(compiled, limits));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::FromCompiled(std::move(compiled)));
  SLUICE_RETURN_IF_ERROR(pipeline->compiled().nodes.front().format->Load());
  ElementSpec out;
  for (const ColumnSpec& c : pipeline->output_schema().columns()) {
    ColumnSpecProto* p = out.add_columns();
    p->set_name(c.name);
    p->set_dtype(std::string(DTypeName(c.dtype)));
    for (int64_t d : c.shape.dims()) p->add_shape(d);
    p->set_ragged(c.ragged);
  }
  out.set_batched(pipeline->batched());
  for (const graph::CompiledNode& node : pipeline->compiled().nodes) {
    if (node.kind == graph::NodeKind::kBatch) {
      out.set_batch_size(node.count);
      out.set_drop_remainder(node.drop_remainder);
    }
  }
  out.set_cardinality(pipeline->Cardinality());
  const std::vector<io::Split>& splits = pipeline->Splits();
  out.set_num_splits(static_cast<int64_t>(splits.size()));
  out.mutable_splits()->Reserve(static_cast<int>(3 * splits.size()));
  for (const io::Split& split : splits) {
    out.add_splits(split.file);
    out.add_splits(split.begin_record);
    out.add_splits(split.end_record);
  }
  out.set_source_name(pipeline->compiled().nodes.front().name);
  out.set_listing(pipeline->Listing());
  return out;
}

std::vector<int64_t> EpochSplitIndices(const ElementSpec& element, const PipelineDef& def, uint64_t epoch) {
  if (def.nodes_size() > 0 && def.nodes(0).source().shuffle_splits()) {
    return exec::ShuffledSplitOrder(element.num_splits(), def.seed(), element.source_name(), epoch);
  }
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(element.num_splits(), 0)));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

}  // namespace sluice::service
