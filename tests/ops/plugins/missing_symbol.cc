// A plugin that needs a function no library provides: loading it must fail
// naming the symbol, not crash when the op runs.
#include "sluice/sluice.h"

extern "C" int sluice_test_no_such_function(int);

namespace {

absl::Status Register(sluice::ops::PluginRegistrar& r) {
  return sluice_test_no_such_function(1) == 0 ? absl::OkStatus() : absl::InternalError("unreachable");
}

}  // namespace

SLUICE_PLUGIN(Register)
