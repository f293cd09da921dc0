// sluice ops: the registered ops with their docs, attrs and defaults.
#include <cstdio>

#include "sluice/cli/command.h"
#include "sluice/ops/op_registry.h"

namespace sluice::cli {
namespace {

absl::Status ListOps(const std::string& only) {
  bool found = false;
  for (const ops::OpSchema* op : ops::OpRegistry::Builtin().List()) {
    if (!only.empty() && op->name != only) continue;
    found = true;
    std::printf("%s%s%s\n  %s\n", op->name.c_str(), op->random ? "  [random]" : "",
                op->predicate ? "  [filter predicate]" : "", op->doc.c_str());
    for (const ops::AttrSchema& a : op->attrs) {
      std::printf("    %-11s %-7s %-22s %s\n", a.name.c_str(),
                  std::string(ops::AttrTypeName(a.type)).c_str(),
                  a.default_json.empty() ? "(required)" : ("= " + a.default_json).c_str(),
                  a.doc.c_str());
    }
    std::printf("\n");
  }
  if (!found) return absl::NotFoundError("no op named '" + only + "'; run `sluice ops` for the list");
  return absl::OkStatus();
}

}  // namespace

void AddOpsCommand(CLI::App& app, absl::Status* result) {
  auto only = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("ops", "List the ops a pipeline can use, with attrs and defaults");
  cmd->add_option("name", *only, "show only this op");
  cmd->callback([only, result] { *result = ListOps(*only); });
}

}  // namespace sluice::cli
