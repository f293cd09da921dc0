// An op's declaration, written once: name, doc, typed attrs, the columns it
// reads and writes, its properties, and the inference step that turns attrs
// and an input schema into output columns and typed params. Kernels are
// separate (kernel.h) and registered per backend (op_registry.h).
#ifndef SLUICE_OPS_OP_SCHEMA_H_
#define SLUICE_OPS_OP_SCHEMA_H_

#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/schema.h"
#include "sluice/ops/attrs.h"

namespace sluice::ops {

// Where an op's kernel may run: on any rows (one sample, a tile, the rows
// of a batch), or only on a whole batch at once (mixing samples).
enum class OpLevel { kSample, kBatch };

// A column an op reads or writes, for its documentation: e.g. {"field",
// "uint8 or float32 image [H,W] or [H,W,C]"}.
struct PortSchema {
  std::string name;
  std::string doc;
};

// What inference made of one op instance: the columns it reads (indices in
// the input schema) and writes (replacing same-named columns, or appended),
// the columns it drops, and its validated params, from which each backend's
// kernel is made. Immutable once inferred; the params are shared, not
// copied, by the kernels and the fusion passes.
class InferredOp {
 public:
  std::vector<int> inputs;
  std::vector<ColumnSpec> outputs;
  std::vector<std::string> drops;
  // This instance draws random numbers (a random op with a fixed setting,
  // e.g. a blur with one sigma, does not).
  bool random = false;
  // It may draw from generators sluice cannot see (a Python function's
  // numpy, torch or random global ones): its output is never written once
  // for all epochs (materialize, a kept prefix), as a random op's.
  bool draws_unseen = false;

  template <typename P>
  void SetParams(P params) {
    params_ = std::make_shared<const P>(std::move(params));
    params_type_ = typeid(P).name();
  }
  // Whether the params are a P (compared by type name, so that types from
  // a plugin's shared object compare equal to the same types here).
  template <typename P>
  bool HoldsParams() const {
    return params_type_ != nullptr && std::string(params_type_) == typeid(P).name();
  }
  // REQUIRES: HoldsParams<P>().
  template <typename P>
  const P& params() const {
    return *static_cast<const P*>(params_.get());
  }

 private:
  std::shared_ptr<const void> params_;
  const char* params_type_ = nullptr;
};

using InferFn = std::function<absl::StatusOr<InferredOp>(const Attrs& attrs, const Schema& input)>;

// Built with chained setters:
//   OpSchema("rescale").Doc("...").Attr(FieldAttr()).Attr({"scale", ...})
//       .Input("field", "...").Output("field", "float32").Infer(InferRescale)
class OpSchema {
 public:
  explicit OpSchema(std::string name) : name_(std::move(name)) {}

  OpSchema& Doc(std::string doc);
  OpSchema& Attr(AttrSchema attr);
  OpSchema& Input(std::string name, std::string doc);
  OpSchema& Output(std::string name, std::string doc);
  // May draw random numbers: keyed by (seed, op, epoch, sample).
  OpSchema& Random();
  // Runs on whole batches only (OpLevel::kBatch).
  OpSchema& BatchLevel();
  // Yields a per-sample keep (1) or drop (0) byte: usable in filter nodes.
  OpSchema& Predicate();
  // Reinterprets its input's bytes (reshape): the executor aliases the
  // buffer and runs no kernel, so it runs on every backend.
  OpSchema& View();
  // Each output element is a cheap function of the same element of its one
  // input (and of its position in the row): rescale, normalize, cast. Such
  // an op can run on any whole rows as they arrive; the service's client
  // runs one as it receives a column (graph/fold_receive.h), sparing a
  // pass over memory.
  OpSchema& Elementwise();
  // Its kernel may get the same memory for output 0 as for input 0, and
  // then works in place (it can tell: in[0].data == out[0].data). The
  // executor does so only for an op on whole batches whose input 0 is a
  // column of the batch it received that nothing else holds or reads
  // afterwards, and whose output 0 replaces it with the same bytes a row:
  // the batch is then not copied (cutmix writes only its box).
  OpSchema& InPlace();
  // Each call of its kernel costs more than its rows do (python: a round
  // trip to its processes, which idle while the runner works the tile's
  // other ops): the executor calls it once on a runner's whole range of
  // rows (up to 16 MiB of the chain's scratch), not on cache-sized tiles.
  OpSchema& WholeRanges();
  // Made by the graph (parse_example, fused ops), never written in a
  // pipeline; `sluice ops` does not list it.
  OpSchema& Internal();
  OpSchema& Infer(InferFn infer);

  const std::string& name() const { return name_; }
  const std::string& doc() const { return doc_; }
  const std::vector<AttrSchema>& attrs() const { return attrs_; }
  const std::vector<PortSchema>& inputs() const { return inputs_; }
  const std::vector<PortSchema>& outputs() const { return outputs_; }
  bool random() const { return random_; }
  OpLevel level() const { return level_; }
  bool predicate() const { return predicate_; }
  bool view() const { return view_; }
  bool elementwise() const { return elementwise_; }
  bool in_place() const { return in_place_; }
  bool whole_ranges() const { return whole_ranges_; }
  bool internal() const { return internal_; }
  const InferFn& infer() const { return infer_; }

 private:
  std::string name_;
  std::string doc_;
  std::vector<AttrSchema> attrs_;
  std::vector<PortSchema> inputs_, outputs_;
  bool random_ = false;
  OpLevel level_ = OpLevel::kSample;
  bool predicate_ = false;
  bool view_ = false;
  bool elementwise_ = false;
  bool in_place_ = false;
  bool whole_ranges_ = false;
  bool internal_ = false;
  InferFn infer_;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_OP_SCHEMA_H_
