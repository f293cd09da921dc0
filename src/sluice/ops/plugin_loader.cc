// Loading op plugins: dlopen with every symbol resolved up front (a missing
// one is an error now, not a crash mid-epoch), the ABI stamp compared
// before any of the plugin's C++ is called, then its registration.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "sluice/ops/plugin.h"

namespace sluice::ops {
namespace {

using AbiFn = const char* (*)();
using LayoutFn = unsigned long (*)();
using RegisterFn = void (*)(PluginRegistrar*);

absl::Mutex loaded_mu;
// (registry, canonical path) pairs already loaded.
std::set<std::pair<const OpRegistry*, std::string>>& Loaded() {
  static auto* loaded = new std::set<std::pair<const OpRegistry*, std::string>>();
  return *loaded;
}

absl::Status PluginError(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("plugin ", path, ": ", message));
}

}  // namespace

absl::Status LoadPlugin(const std::string& path, OpRegistry* registry) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(absl::StrCat("plugin ", path, ": no such file"));
  }
  const std::string file = resolved;
  absl::MutexLock lock(&loaded_mu);
  if (Loaded().count({registry, file}) > 0) return absl::OkStatus();
  // RTLD_NOW: an undefined symbol fails here, naming itself.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return PluginError(file, absl::StrCat("cannot be loaded: ", dlerror()));
  const auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "sluice_plugin_abi"));
  const auto layout = reinterpret_cast<LayoutFn>(dlsym(handle, "sluice_plugin_layout"));
  const auto register_ops = reinterpret_cast<RegisterFn>(dlsym(handle, "sluice_plugin_register"));
  if (abi == nullptr || layout == nullptr || register_ops == nullptr) {
    dlclose(handle);
    return PluginError(file, "is not a sluice plugin (it exports no sluice_plugin_abi, sluice_plugin_layout and "
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
  register_ops(&registrar);
  // A failed registration may have registered some ops, whose code is in
  // the plugin: it stays loaded either way.
  if (!registrar.status().ok()) return PluginError(file, registrar.status().message());
  Loaded().insert({registry, file});
  return absl::OkStatus();
}

}  // namespace sluice::ops
