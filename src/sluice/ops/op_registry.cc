#include "sluice/ops/op_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/simd.h"

namespace sluice::ops {

#ifdef SLUICE_WITH_CUDA
// ops/cuda/: the cuda runtime and the ops' cuda kernels.
absl::Status RegisterCudaBackend(OpRegistry* registry);
#endif

namespace {

// Levenshtein distance: the fewest one-character inserts, deletions and
// substitutions from a to b.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

OpRegistry::OpRegistry() = default;
OpRegistry::~OpRegistry() = default;

OpRegistry& OpRegistry::Global() {
  static OpRegistry* registry = [] {
    LimitSimdFromEnvironment();  // before any kernel runs
    auto* r = new OpRegistry();
    const absl::Status s = RegisterBuiltinOps(r);
    if (!s.ok()) {  // a defect of this build, not of any input
      std::fprintf(stderr, "sluice: registering the built-in ops failed: %s\n", s.ToString().c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

absl::Status OpRegistry::AddOp(OpSchema schema, const std::string& registrant) {
  const std::string name = schema.name();
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(registrant, ": an op needs a name"));
  if (!schema.infer() && !schema.internal()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name, "' (", registrant, ") has no inference step"));
  }
  if (schema.doc().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name, "' (", registrant, ") has no doc"));
  }
  absl::MutexLock lock(&mu_);
  auto it = ops_.find(name);
  if (it != ops_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name, "' is registered twice: by ",
                                                   it->second->registrant, " and by ", registrant));
  }
  auto entry = std::make_unique<Entry>(std::move(schema));
  entry->registrant = registrant;
  ops_.emplace(name, std::move(entry));
  return absl::OkStatus();
}

absl::Status OpRegistry::AddKernel(const std::string& op, Backend backend, KernelFactory factory,
                                   const std::string& registrant) {
  absl::MutexLock lock(&mu_);
  auto it = ops_.find(op);
  if (it == ops_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(registrant, ": a ", BackendName(backend), " kernel for op '", op, "', which is not registered"));
  }
  auto [k, added] = it->second->kernels.emplace(backend, KernelEntry{std::move(factory), registrant});
  if (!added) {
    return absl::InvalidArgumentError(absl::StrCat("the ", BackendName(backend), " kernel of op '", op,
                                                   "' is registered twice: by ", k->second.registrant, " and by ",
                                                   registrant));
  }
  return absl::OkStatus();
}

absl::Status OpRegistry::AddRuntime(std::unique_ptr<DeviceRuntime> runtime) {
  const Backend backend = runtime->backend();
  absl::MutexLock lock(&mu_);
  if (!runtimes_.emplace(backend, std::move(runtime)).second) {
    return absl::InvalidArgumentError(absl::StrCat("the ", BackendName(backend), " runtime is registered twice"));
  }
  return absl::OkStatus();
}

const OpRegistry::Entry* OpRegistry::FindEntry(absl::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpSchema* OpRegistry::Find(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  const Entry* e = FindEntry(name);
  return e == nullptr ? nullptr : &e->schema;
}

std::vector<const OpSchema*> OpRegistry::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<const OpSchema*> out;
  for (const auto& [name, entry] : ops_) {
    if (!entry->schema.internal()) out.push_back(&entry->schema);
  }
  return out;
}

std::vector<Backend> OpRegistry::Backends(absl::string_view op) const {
  std::vector<Backend> out;
  for (Backend b : {Backend::kCpu, Backend::kCuda}) {
    if (Runs(op, b)) out.push_back(b);
  }
  return out;
}

bool OpRegistry::Runs(absl::string_view op, Backend backend) const {
  absl::ReaderMutexLock lock(&mu_);
  const Entry* e = FindEntry(op);
  if (e == nullptr) return false;
  if (e->schema.view()) return backend == Backend::kCpu || runtimes_.count(backend) > 0;
  return e->kernels.count(backend) > 0;
}

std::string OpRegistry::Registrant(absl::string_view op) const {
  absl::ReaderMutexLock lock(&mu_);
  const Entry* e = FindEntry(op);
  return e == nullptr ? "" : e->registrant;
}

DeviceRuntime* OpRegistry::runtime(Backend backend) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = runtimes_.find(backend);
  return it == runtimes_.end() ? nullptr : it->second.get();
}

std::string OpRegistry::BackendNames(const Entry& entry) const {
  std::vector<std::string> names;
  for (const auto& [backend, kernel] : entry.kernels) names.emplace_back(BackendName(backend));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

absl::StatusOr<InferredOp> OpRegistry::Infer(absl::string_view name, const google::protobuf::Struct& attrs,
                                             const Schema& input) const {
  const OpSchema* schema = Find(name);
  if (schema == nullptr || schema->internal()) {
    std::vector<std::string> names;
    std::string nearest;
    size_t nearest_edits = 3;  // a suggestion only for a near miss (a typo)
    for (const OpSchema* op : List()) {
      if (op->internal()) continue;
      names.push_back(op->name());
      const size_t edits = EditDistance(name, op->name());
      if (edits < nearest_edits) nearest_edits = edits, nearest = op->name();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown op '", name, "'", nearest.empty() ? "" : absl::StrCat("; did you mean '", nearest, "'?"),
                     " (ops: ", absl::StrJoin(names, ", "), "; a plugin's ops exist once it is loaded: --plugin)"));
  }
  absl::StatusOr<Attrs> bound = Attrs::Bind(schema->attrs(), attrs);
  if (!bound.ok()) return WithContext(bound.status(), absl::StrCat("op '", name, "'"));
  return InferWith(name, *bound, input);
}

absl::StatusOr<InferredOp> OpRegistry::InferWith(absl::string_view name, const Attrs& attrs,
                                                 const Schema& input) const {
  const OpSchema* schema = Find(name);
  if (schema == nullptr || !schema->infer()) {
    return absl::InternalError(absl::StrCat("op '", name, "' cannot be inferred"));
  }
  absl::StatusOr<InferredOp> op = schema->infer()(attrs, input);
  if (!op.ok()) return WithContext(op.status(), absl::StrCat("op '", name, "'"));
  // An op that never draws cannot have a random instance.
  op->random = op->random && schema->random();
  return op;
}

absl::StatusOr<std::unique_ptr<Kernel>> OpRegistry::MakeKernel(absl::string_view op, Backend backend,
                                                               const InferredOp& inferred) const {
  KernelFactory factory;
  {
    absl::ReaderMutexLock lock(&mu_);
    const Entry* e = FindEntry(op);
    if (e == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown op '", op, "'"));
    auto it = e->kernels.find(backend);
    if (it == e->kernels.end()) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op, "' has no ", BackendName(backend),
                                                     " kernel (it has: ", BackendNames(*e), ")"));
    }
    factory = it->second.factory;
  }
  absl::StatusOr<std::unique_ptr<Kernel>> kernel = factory(inferred);
  if (!kernel.ok()) return WithContext(kernel.status(), absl::StrCat("op '", op, "'"));
  return kernel;
}

absl::Status RegisterBuiltinOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterParseOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterDecodeOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterImageCropOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterColorOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterImageFilterOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterGeometryOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterPadCropOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterPixelOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterLabelMixOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterRandomErasing(registry));
  SLUICE_RETURN_IF_ERROR(RegisterColorJitterOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterAutoAugmentOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterPredicateOps(registry));
  SLUICE_RETURN_IF_ERROR(RegisterPythonOps(registry));
#ifdef SLUICE_WITH_CUDA
  SLUICE_RETURN_IF_ERROR(RegisterCudaBackend(registry));
#endif
  return absl::OkStatus();
}

}  // namespace sluice::ops
