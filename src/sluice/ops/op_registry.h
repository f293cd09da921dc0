// The registry of ops: name, doc, attrs and how to bind an instance to the
// columns it reads. Docs live here so `sluice ops`, --help and Python
// docstrings come from one source.
#ifndef SLUICE_OPS_OP_REGISTRY_H_
#define SLUICE_OPS_OP_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/schema.h"
#include "sluice/ops/attrs.h"
#include "sluice/ops/kernel.h"

namespace sluice::ops {

// An op instance bound to a node's input columns.
struct OpBinding {
  std::vector<int> inputs;             // column indices in the input schema
  std::vector<ColumnSpec> outputs;     // replace same-named columns, or append
  std::shared_ptr<const Kernel> kernel;
  // Draws random numbers (output depends on seed, epoch and sample index).
  bool random = false;
  // The output is the input's bytes reinterpreted (reshape, decode_raw to
  // uint8): the executor aliases the buffer and never runs the kernel.
  bool view = false;
  // Input columns that no longer exist after the op (e.g. parsed records).
  std::vector<std::string> drops;
};

using BindFn = std::function<absl::StatusOr<OpBinding>(const Attrs&, const Schema&)>;

struct OpSchema {
  std::string name;
  std::string doc;
  std::vector<AttrSchema> attrs;
  // May draw random numbers (see OpBinding::random for an instance).
  bool random = false;
  // Yields a per-sample keep/drop mask (usable in a filter node only).
  bool predicate = false;
  BindFn bind;
};

// Thread-safe after registration; register everything before first use.
class OpRegistry {
 public:
  // The process-wide registry with every built-in op registered.
  static const OpRegistry& Builtin();

  void Register(OpSchema schema);
  // nullptr when unknown.
  const OpSchema* Find(absl::string_view name) const;
  std::vector<const OpSchema*> List() const;

  // Binds op `name` with `attrs` to `input`. InvalidArgument naming the op
  // (unknown op, bad attr, unsuitable column).
  absl::StatusOr<OpBinding> Bind(absl::string_view name, const google::protobuf::Struct& attrs,
                                 const Schema& input) const;

 private:
  std::map<std::string, OpSchema, std::less<>> ops_;
};

// One per op family; RegisterBuiltinOps calls them all.
void RegisterParseOps(OpRegistry* registry);
void RegisterDecodeOps(OpRegistry* registry);
void RegisterImageCropOps(OpRegistry* registry);
void RegisterColorOps(OpRegistry* registry);
void RegisterImageFilterOps(OpRegistry* registry);
void RegisterGeometryOps(OpRegistry* registry);
void RegisterPredicateOps(OpRegistry* registry);
void RegisterBuiltinOps(OpRegistry* registry);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_OP_REGISTRY_H_
