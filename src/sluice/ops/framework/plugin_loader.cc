// Loading op plugins: dlopen with every symbol resolved up front (a missing
// one is an error now, not a crash mid-epoch), the ABI stamp compared
// before any of the plugin's C++ is called, then its registration.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "sluice/ops/framework/guarded_call.h"
#include "sluice/ops/plugin.h"

namespace sluice::ops {
namespace {

using AbiFn = const char* (*)();
using LayoutFn = unsigned long (*)();
using RegisterFn = void (*)(PluginRegistrar*);

struct LoadedPlugin {
  const OpRegistry* registry;
  std::string path;     // canonical
  absl::Status status;  // what loading it returned
};

absl::Mutex loaded_mu;
// Every load attempted, in order.
std::vector<LoadedPlugin>& Loaded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(loaded_mu) {
  static auto* loaded = new std::vector<LoadedPlugin>();
  return *loaded;
}

absl::Status PluginError(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("plugin ", path, ": ", message));
}

// Opens, checks and registers the plugin at canonical path `file`.
absl::Status Load(const std::string& file, OpRegistry* registry) {
  // RTLD_NOW: an undefined symbol fails here, naming itself.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return PluginError(file, absl::StrCat("cannot be loaded: ", dlerror()));
  const auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "sluice_plugin_abi"));
  const auto layout = reinterpret_cast<LayoutFn>(dlsym(handle, "sluice_plugin_layout"));
  const auto register_ops = reinterpret_cast<RegisterFn>(dlsym(handle, "sluice_plugin_register"));
  if (abi == nullptr || layout == nullptr || register_ops == nullptr) {
    dlclose(handle);
    return PluginError(file,
                       "is not a sluice plugin (it exports no sluice_plugin_abi, sluice_plugin_layout and "
                       "sluice_plugin_register: end its source with SLUICE_PLUGIN(<register function>))");
  }
  const std::string theirs = abi();
  const unsigned long their_layout = layout();
  const unsigned long our_layout = SLUICE_PLUGIN_LAYOUT;
  if (theirs != SLUICE_PLUGIN_ABI_STAMP || their_layout != our_layout) {
    dlclose(handle);
    return PluginError(file, absl::StrCat("was built for another sluice (", theirs, " layout=", their_layout,
                                          "; this one is ", SLUICE_PLUGIN_ABI_STAMP, " layout=", our_layout,
                                          "): rebuild it against this installation's headers"));
  }
  PluginRegistrar registrar(registry, file);
  const absl::Status called = Guarded("its registration function", [&] {
    register_ops(&registrar);
    return absl::OkStatus();
  });
  const absl::Status registered = called.ok() ? registrar.status() : called;
  if (registered.ok()) return absl::OkStatus();
  // What a failed registration did register is taken back, all or nothing;
  // the plugin's code stays loaded (a thread may still run it).
  registry->Withdraw(file);
  return PluginError(file, registered.message());
}

}  // namespace

absl::Status LoadPlugin(const std::string& path, OpRegistry* registry) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(absl::StrCat("plugin ", path, ": no such file"));
  }
  const std::string file = resolved;
  absl::MutexLock lock(&loaded_mu);
  for (const LoadedPlugin& p : Loaded()) {
    if (p.registry == registry && p.path == file) return p.status;  // registering again would only collide
  }
  absl::Status status = Load(file, registry);
  Loaded().push_back(LoadedPlugin{registry, file, status});
  return status;
}

std::vector<std::string> LoadedPlugins() {
  absl::MutexLock lock(&loaded_mu);
  std::vector<std::string> paths;
  for (const LoadedPlugin& p : Loaded()) {
    if (p.registry == &OpRegistry::Global() && p.status.ok()) paths.push_back(p.path);
  }
  return paths;
}

}  // namespace sluice::ops
