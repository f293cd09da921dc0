// A plugin built for another sluice: its stamp says an older op API.
extern "C" __attribute__((visibility("default"))) const char* sluice_plugin_abi() {
  return "sluice-abi=0 sluice=0.0.1 cxx11abi=1 absl=20220623";
}
extern "C" __attribute__((visibility("default"))) unsigned long sluice_plugin_layout() { return 1; }
// Never called: the loader refuses the plugin before.
extern "C" __attribute__((visibility("default"))) void sluice_plugin_register(void*) { __builtin_trap(); }
