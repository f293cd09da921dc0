#include "sluice/ops/op_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/struct.pb.h"
#include "sluice/core/edit_distance.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/simd.h"
#include "sluice/ops/attrs.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/framework/guarded_call.h"

namespace sluice::ops {

using kernels::LimitSimdFromEnvironment;

namespace {

// What an op's inference gave, checked before the graph relies on it: a
// plugin's mistake is an error naming it, not a crash.
absl::Status CheckInferred(const OpSchema& schema, const InferredOp& op, const Schema& input) {
  for (int i : op.inputs) {
    if (i < 0 || i >= input.size()) {
      return absl::InternalError(absl::StrCat("read input column ", i, " of ", input.size()));
    }
  }
  // A declared port may stand for several columns (python's "outputs").
  if (op.outputs.empty() && !schema.outputs().empty()) {
    return absl::InternalError(absl::StrCat("gave no output column; the op declares ", schema.outputs().size()));
  }
  for (const ColumnSpec& column : op.outputs) {
    if (column.name.empty()) return absl::InternalError("gave an output column without a name");
    if (column.ragged) continue;
    int64_t bytes = static_cast<int64_t>(DTypeSize(column.dtype));
    for (int64_t d : column.shape.dims()) {
      if (d < 0 || (d > 0 && bytes > (int64_t{1} << 48) / d)) {
        return absl::InternalError(absl::StrCat("gave output '", column.name, "' the shape ", column.shape.ToString()));
      }
      bytes *= d;
    }
  }
  return absl::OkStatus();
}

}  // namespace

class OpRegistry::Impl {
 public:
  struct KernelEntry {
    KernelFactory factory;
    std::string registrant;
  };
  struct Entry {
    explicit Entry(OpSchema s) : schema(std::move(s)) {}
    OpSchema schema;
    std::string registrant;
    std::map<Backend, KernelEntry> kernels;
  };

  const Entry* FindEntry(absl::string_view name) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    auto it = ops.find(name);
    return it == ops.end() ? nullptr : it->second.get();
  }
  static std::string BackendNames(const Entry& entry) {
    std::vector<std::string> names;
    for (const auto& [backend, kernel] : entry.kernels) names.emplace_back(BackendName(backend));
    return names.empty() ? "none" : absl::StrJoin(names, ", ");
  }

  mutable absl::Mutex mu;
  std::map<std::string, std::unique_ptr<Entry>, std::less<>> ops ABSL_GUARDED_BY(mu);
  // Withdrawn ops, kept: a thread may hold their schema.
  std::vector<std::unique_ptr<Entry>> withdrawn ABSL_GUARDED_BY(mu);
  std::map<Backend, std::unique_ptr<DeviceRuntime>> runtimes ABSL_GUARDED_BY(mu);
};

OpRegistry::OpRegistry() : impl_(std::make_unique<Impl>()) {}
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
  if (absl::Status defaults = Attrs::CheckDefaults(schema.attrs()); !defaults.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name, "' (", registrant, "): ", defaults.message()));
  }
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->ops.find(name);
  if (it != impl_->ops.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", name, "' is registered twice: by ", it->second->registrant, " and by ", registrant));
  }
  auto entry = std::make_unique<Impl::Entry>(std::move(schema));
  entry->registrant = registrant;
  impl_->ops.emplace(name, std::move(entry));
  return absl::OkStatus();
}

absl::Status OpRegistry::AddKernel(const std::string& op, Backend backend, KernelFactory factory,
                                   const std::string& registrant) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->ops.find(op);
  if (it == impl_->ops.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(registrant, ": a ", BackendName(backend), " kernel for op '", op, "', which is not registered"));
  }
  auto [k, added] = it->second->kernels.emplace(backend, Impl::KernelEntry{std::move(factory), registrant});
  if (!added) {
    return absl::InvalidArgumentError(absl::StrCat("the ", BackendName(backend), " kernel of op '", op,
                                                   "' is registered twice: by ", k->second.registrant, " and by ",
                                                   registrant));
  }
  return absl::OkStatus();
}

void OpRegistry::Withdraw(const std::string& registrant) {
  absl::MutexLock lock(&impl_->mu);
  for (auto it = impl_->ops.begin(); it != impl_->ops.end();) {
    std::map<Backend, Impl::KernelEntry>& kernels = it->second->kernels;
    for (auto k = kernels.begin(); k != kernels.end();) k = k->second.registrant == registrant ? kernels.erase(k) : ++k;
    if (it->second->registrant != registrant) {
      ++it;
      continue;
    }
    impl_->withdrawn.push_back(std::move(it->second));
    it = impl_->ops.erase(it);
  }
}

absl::Status OpRegistry::AddRuntime(std::unique_ptr<DeviceRuntime> runtime) {
  const Backend backend = runtime->backend();
  absl::MutexLock lock(&impl_->mu);
  if (!impl_->runtimes.emplace(backend, std::move(runtime)).second) {
    return absl::InvalidArgumentError(absl::StrCat("the ", BackendName(backend), " runtime is registered twice"));
  }
  return absl::OkStatus();
}

const OpSchema* OpRegistry::Find(absl::string_view name) const {
  absl::ReaderMutexLock lock(&impl_->mu);
  const Impl::Entry* e = impl_->FindEntry(name);
  return e == nullptr ? nullptr : &e->schema;
}

std::vector<const OpSchema*> OpRegistry::List() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  std::vector<const OpSchema*> out;
  for (const auto& [name, entry] : impl_->ops) {
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
  absl::ReaderMutexLock lock(&impl_->mu);
  const Impl::Entry* e = impl_->FindEntry(op);
  if (e == nullptr) return false;
  if (e->schema.view()) return backend == Backend::kCpu || impl_->runtimes.count(backend) > 0;
  return e->kernels.count(backend) > 0;
}

std::string OpRegistry::Registrant(absl::string_view op) const {
  absl::ReaderMutexLock lock(&impl_->mu);
  const Impl::Entry* e = impl_->FindEntry(op);
  return e == nullptr ? "" : e->registrant;
}

DeviceRuntime* OpRegistry::runtime(Backend backend) const {
  absl::ReaderMutexLock lock(&impl_->mu);
  auto it = impl_->runtimes.find(backend);
  return it == impl_->runtimes.end() ? nullptr : it->second.get();
}

std::string OpRegistry::NearestName(absl::string_view name) const {
  std::string nearest;
  size_t nearest_edits = 3;  // a suggestion only for a near miss (a typo)
  for (const OpSchema* op : List()) {
    const size_t edits = EditDistance(name, op->name());
    if (edits < nearest_edits) nearest_edits = edits, nearest = op->name();
  }
  return nearest;
}

absl::StatusOr<InferredOp> OpRegistry::Infer(absl::string_view name, const google::protobuf::Struct& attrs,
                                             const Schema& input) const {
  const OpSchema* schema = Find(name);
  if (schema == nullptr || schema->internal()) {
    std::vector<std::string> names;
    for (const OpSchema* op : List()) names.push_back(op->name());
    const std::string nearest = NearestName(name);
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
  absl::StatusOr<InferredOp> op = Guarded("its inference", [&] { return schema->infer()(attrs, input); });
  if (!op.ok()) return WithContext(op.status(), absl::StrCat("op '", name, "'"));
  if (absl::Status checked = CheckInferred(*schema, *op, input); !checked.ok()) {
    return absl::InternalError(
        absl::StrCat("op '", name, "' (", Registrant(name), "): its inference step ", checked.message()));
  }
  // An op that never draws cannot have a random instance.
  op->random = op->random && schema->random();
  return op;
}

absl::StatusOr<std::unique_ptr<Kernel>> OpRegistry::MakeKernel(absl::string_view op, Backend backend,
                                                               const InferredOp& inferred) const {
  KernelFactory factory;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    const Impl::Entry* e = impl_->FindEntry(op);
    if (e == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown op '", op, "'"));
    auto it = e->kernels.find(backend);
    if (it == e->kernels.end()) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op, "' has no ", BackendName(backend),
                                                     " kernel (it has: ", Impl::BackendNames(*e), ")"));
    }
    factory = it->second.factory;
  }
  absl::StatusOr<std::unique_ptr<Kernel>> kernel =
      Guarded("its kernel's constructor", [&] { return factory(inferred); });
  if (!kernel.ok()) return WithContext(kernel.status(), absl::StrCat("op '", op, "'"));
  return kernel;
}

}  // namespace sluice::ops
