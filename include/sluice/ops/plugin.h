// Writing an op plugin: a shared object built against the installed sluice
// (find_package(sluice)) that registers ops and kernels when loaded with
// `--plugin PATH.so` or sluice.load_plugin(path). One macro names the
// function that registers them:
//
//   absl::Status RegisterMyOps(sluice::ops::PluginRegistrar& r) {
//     SLUICE_RETURN_IF_ERROR(r.AddOp(sluice::ops::OpSchema("my_op").Doc(...).Infer(InferMyOp)));
//     return r.AddKernel<MyOpKernel>("my_op", sluice::ops::Backend::kCpu);
//   }
//   SLUICE_PLUGIN(RegisterMyOps)
//
// The plugin also exports the ABI stamp of the headers it was built with;
// the loader refuses a plugin whose stamp differs from its own, naming the
// file, instead of crashing on a layout it does not know.
#ifndef SLUICE_OPS_PLUGIN_H_
#define SLUICE_OPS_PLUGIN_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/base/config.h"
#include "absl/status/status.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/op_registry.h"
#include "sluice/version.h"

#define SLUICE_PLUGIN_STR_(x) #x
#define SLUICE_PLUGIN_STR(x) SLUICE_PLUGIN_STR_(x)

// What must match between a plugin and the sluice that loads it: the op
// API's version, the library's, the C++ standard library's string ABI and
// abseil's release (Status crosses the boundary)...
#define SLUICE_PLUGIN_ABI_STAMP                                                                                        \
  "sluice-abi=" SLUICE_PLUGIN_STR(SLUICE_ABI_VERSION) " sluice=" SLUICE_VERSION_STRING " cxx11abi=" SLUICE_PLUGIN_STR( \
      _GLIBCXX_USE_CXX11_ABI) " absl=" SLUICE_PLUGIN_STR(ABSL_LTS_RELEASE_VERSION)
// ...and the sizes of the types kernels and inference exchange with the
// executor. Both are exported as C values, readable whatever the mismatch.
#define SLUICE_PLUGIN_LAYOUT                                                        \
  (sizeof(::sluice::ops::KernelContext) + 1000 * sizeof(::sluice::ops::ColumnRef) + \
   100000 * sizeof(::sluice::ops::InferredOp) + 10000000 * sizeof(::sluice::ops::OpSchema))

namespace sluice::ops {

// What a plugin's registration function gets: the registry, and the name
// its ops are registered under (the plugin's path, so that a name taken
// twice names both files).
class PluginRegistrar {
 public:
  PluginRegistrar(OpRegistry* registry, std::string registrant)
      : registry_(registry), registrant_(std::move(registrant)) {}

  absl::Status AddOp(OpSchema schema) { return registry_->AddOp(std::move(schema), registrant_); }
  absl::Status AddKernel(const std::string& op, Backend backend, KernelFactory factory) {
    return registry_->AddKernel(op, backend, std::move(factory), registrant_);
  }
  template <typename K>
  absl::Status AddKernel(const std::string& op, Backend backend) {
    return registry_->AddKernel(op, backend, KernelOf<K>(), registrant_);
  }
  const std::string& registrant() const { return registrant_; }

  // The outcome of the registration function (set by SLUICE_PLUGIN).
  void set_status(absl::Status status) { status_ = std::move(status); }
  const absl::Status& status() const { return status_; }

 private:
  OpRegistry* registry_;
  std::string registrant_;
  absl::Status status_;
};

// Loads the plugin at `path` into `registry` (the process's by default):
// opens it, checks its ABI stamp, runs its registration. Loading a path
// again returns what the first load returned. NotFound for a missing
// file; InvalidArgument naming the file when it cannot be opened (a missing
// symbol), is not a sluice plugin, was built for another ABI, or fails to
// register (e.g. an op name taken). Plugins are never unloaded: their code
// backs the kernels they made.
absl::Status LoadPlugin(const std::string& path, OpRegistry* registry = &OpRegistry::Global());

// The plugins loaded into the process's registry, as canonical paths, in
// load order: what worker processes it starts must load too.
std::vector<std::string> LoadedPlugins();

}  // namespace sluice::ops

// Exports the plugin's entry points; `register_fn` is
// absl::Status(sluice::ops::PluginRegistrar&).
#define SLUICE_PLUGIN(register_fn)                                                         \
  extern "C" __attribute__((visibility("default"))) const char* sluice_plugin_abi() {      \
    return SLUICE_PLUGIN_ABI_STAMP;                                                        \
  }                                                                                        \
  extern "C" __attribute__((visibility("default"))) unsigned long sluice_plugin_layout() { \
    return SLUICE_PLUGIN_LAYOUT;                                                           \
  }                                                                                        \
  extern "C" __attribute__((visibility("default"))) void sluice_plugin_register(           \
      ::sluice::ops::PluginRegistrar* registrar) {                                         \
    registrar->set_status(register_fn(*registrar));                                        \
  }

#endif  // SLUICE_OPS_PLUGIN_H_
