#include "sluice/ops/op_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "sluice/core/status_macros.h"

namespace sluice::ops {

const OpRegistry& OpRegistry::Builtin() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterBuiltinOps(r);
    return r;
  }();
  return *registry;
}

void OpRegistry::Register(OpSchema schema) {
  std::string name = schema.name;
  ops_[name] = std::move(schema);
}

const OpSchema* OpRegistry::Find(absl::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> OpRegistry::List() const {
  std::vector<const OpSchema*> out;
  for (const auto& [name, schema] : ops_) out.push_back(&schema);
  return out;
}

absl::StatusOr<OpBinding> OpRegistry::Bind(absl::string_view name,
                                           const google::protobuf::Struct& attrs,
                                           const Schema& input) const {
  const OpSchema* schema = Find(name);
  if (schema == nullptr) {
    std::vector<std::string> names;
    for (const auto& [n, s] : ops_) names.push_back(n);
    return absl::InvalidArgumentError(absl::StrCat("unknown op '", name, "' (ops: ",
                                                   absl::StrJoin(names, ", "), ")"));
  }
  const std::string context = absl::StrCat("op '", name, "'");
  absl::StatusOr<Attrs> bound = Attrs::Bind(schema->attrs, attrs);
  if (!bound.ok()) return WithContext(bound.status(), context);
  absl::StatusOr<OpBinding> binding = schema->bind(*bound, input);
  if (!binding.ok()) return WithContext(binding.status(), context);
  return binding;
}

void RegisterBuiltinOps(OpRegistry* registry) {
  RegisterParseOps(registry);
  RegisterDecodeOps(registry);
  RegisterImageCropOps(registry);
  RegisterColorOps(registry);
  RegisterImageFilterOps(registry);
  RegisterGeometryOps(registry);
  RegisterPredicateOps(registry);
}

}  // namespace sluice::ops
