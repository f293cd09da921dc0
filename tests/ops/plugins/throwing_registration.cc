// A plugin whose registration function throws a C++ exception: loading it
// is an error naming the file, not the end of the process.
#include <stdexcept>

#include "sluice/sluice.h"

namespace {

absl::Status Register(sluice::ops::PluginRegistrar&) { throw std::runtime_error("no licence file found"); }

}  // namespace

SLUICE_PLUGIN(Register)
