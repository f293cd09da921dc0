// The registry of ops: each op's schema once, its kernels per backend, and
// the runtimes of device backends. Built-in ops, C++ plugin ops and ops a
// test registers are the same thing to it. Docs live with the schemas, so
// `sluice ops`, --help and Python docstrings come from one source.
#ifndef SLUICE_OPS_OP_REGISTRY_H_
#define SLUICE_OPS_OP_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/schema.h"
#include "sluice/ops/device_runtime.h"
#include "sluice/ops/kernel.h"
#include "sluice/ops/op_schema.h"

namespace sluice::ops {

using KernelFactory = std::function<absl::StatusOr<std::unique_ptr<Kernel>>(const InferredOp& op)>;

// A factory making kernels of type K, which is constructible from
// `const typename K::Params&`, the params its op's inference sets.
template <typename K>
KernelFactory KernelOf() {
  return [](const InferredOp& op) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    if (!op.HoldsParams<typename K::Params>()) {
      return absl::InternalError(absl::StrCat("the kernel expects params of type ", typeid(typename K::Params).name(),
                                              ", which the op's inference did not set"));
    }
    return std::make_unique<K>(op.params<typename K::Params>());
  };
}

// Who registered the built-in ops (plugins register under their path).
inline constexpr char kBuiltinRegistrant[] = "sluice's built-in ops";

// Thread-safe: plugins may be loaded while pipelines run. Entries are never
// removed, so the pointers Find and List return stay valid. The built-in
// ops are registered into Global() from one list (ops/builtin_ops.cc).
class OpRegistry {
 public:
  OpRegistry();
  ~OpRegistry();
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // The process's registry: the built-in ops and backends, and whatever
  // plugins were loaded into it. What pipelines compile against by default.
  static OpRegistry& Global();

  // Registers an op. InvalidArgument naming both registrants when its name
  // is taken, or when the schema is incomplete (no inference, no doc).
  absl::Status AddOp(OpSchema schema, const std::string& registrant = kBuiltinRegistrant);
  // Registers `op`'s kernel for `backend`. InvalidArgument when the op is
  // unknown, or naming both registrants when that backend has one already.
  absl::Status AddKernel(const std::string& op, Backend backend, KernelFactory factory,
                         const std::string& registrant = kBuiltinRegistrant);
  template <typename K>
  absl::Status AddKernel(const std::string& op, Backend backend, const std::string& registrant = kBuiltinRegistrant) {
    return AddKernel(op, backend, KernelOf<K>(), registrant);
  }
  // Takes back what `registrant` registered (a plugin whose registration
  // failed part way): its ops are no longer found nor listed, and its
  // kernels of other registrants' ops are gone. Schemas already handed out
  // stay valid.
  void Withdraw(const std::string& registrant);
  // Registers a device backend's runtime (one per backend).
  absl::Status AddRuntime(std::unique_ptr<DeviceRuntime> runtime);

  // nullptr when unknown.
  const OpSchema* Find(absl::string_view name) const;
  // The ops pipelines can name (internal ones left out), sorted by name.
  std::vector<const OpSchema*> List() const;
  // The backends `op` has kernels for (a view op: every backend this
  // build has), in Backend order.
  std::vector<Backend> Backends(absl::string_view op) const;
  // Who registered `op` ("" when unknown).
  std::string Registrant(absl::string_view op) const;
  // The listed op a mistyped `name` likely means (a near miss), or "".
  std::string NearestName(absl::string_view name) const;
  // nullptr when this build has no runtime for `backend` (cpu has none:
  // it needs none).
  DeviceRuntime* runtime(Backend backend) const;

  // Infers op `name` with `attrs` against `input`. InvalidArgument naming
  // the op (unknown op, internal op, bad attr, unsuitable column).
  absl::StatusOr<InferredOp> Infer(absl::string_view name, const google::protobuf::Struct& attrs,
                                   const Schema& input) const;
  // Infers an internal op from attrs the graph made. REQUIRES: registered.
  absl::StatusOr<InferredOp> InferWith(absl::string_view name, const Attrs& attrs, const Schema& input) const;
  // Whether `op` can run on `backend` (has a kernel, or is a view).
  bool Runs(absl::string_view op, Backend backend) const;
  // `op`'s kernel for `backend`, made from `inferred` and not yet set up.
  // InvalidArgument naming the op and its backends when it has none there.
  absl::StatusOr<std::unique_ptr<Kernel>> MakeKernel(absl::string_view op, Backend backend,
                                                     const InferredOp& inferred) const;

 private:
  // The ops, their kernels and the runtimes, behind a lock (op_registry.cc).
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_OP_REGISTRY_H_
