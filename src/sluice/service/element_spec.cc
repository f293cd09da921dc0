#include "sluice/service/element_spec.h"

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::service {

absl::StatusOr<ElementSpec> DescribeElements(const PipelineDef& def) {
  SLUICE_ASSIGN_OR_RETURN(const int distribute, graph::FindDistribute(def));
  if (distribute >= 0) {
    return absl::InvalidArgumentError("register the nodes before the distribute node, not the whole pipeline");
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
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
  out.set_num_splits(static_cast<int64_t>(pipeline->Splits().size()));
  return out;
}

}  // namespace sluice::service
