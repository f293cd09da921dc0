// A plugin that registers an op under a built-in's name.
#include "sluice/sluice.h"

namespace {

absl::Status Register(sluice::ops::PluginRegistrar& r) {
  return r.AddOp(
      sluice::ops::OpSchema("rescale")
          .Doc("a second rescale (a test plugin)")
          .Infer([](const sluice::ops::Attrs&, const sluice::Schema&) -> absl::StatusOr<sluice::ops::InferredOp> {
            return sluice::ops::InferredOp();
          }));
}

}  // namespace

SLUICE_PLUGIN(Register)
