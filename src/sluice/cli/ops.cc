// sluice ops: the registered ops with their docs, attrs, allowed values,
// columns and backends, as text or JSON.
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/command.h"
#include "sluice/cli/plugins.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/op_registry.h"

namespace sluice::cli {
namespace {

struct OpsArgs {
  std::string only;
  bool json = false;
  std::vector<std::string> plugins;
};

std::vector<std::string> BackendNames(const ops::OpRegistry& registry, const ops::OpSchema& op) {
  std::vector<std::string> names;
  for (ops::Backend b : registry.Backends(op.name())) names.emplace_back(ops::BackendName(b));
  return names;
}

nlohmann::json OpJson(const ops::OpRegistry& registry, const ops::OpSchema& op) {
  nlohmann::json attrs = nlohmann::json::array();
  for (const ops::AttrSchema& a : op.attrs()) {
    nlohmann::json attr = {{"name", a.name},
                           {"type", std::string(ops::AttrTypeName(a.type))},
                           {"required", a.default_json.empty()},
                           {"doc", a.doc},
                           {"allowed", a.Constraint()}};
    if (!a.default_json.empty()) attr["default"] = nlohmann::json::parse(a.default_json);
    if (a.min) attr["min"] = *a.min;
    if (a.max) attr["max"] = *a.max;
    if (a.min_exclusive) attr["min_exclusive"] = true;
    if (!a.choices.empty()) attr["choices"] = a.choices;
    attrs.push_back(attr);
  }
  auto ports = [](const std::vector<ops::PortSchema>& ps) {
    nlohmann::json out = nlohmann::json::array();
    for (const ops::PortSchema& p : ps) out.push_back({{"name", p.name}, {"doc", p.doc}});
    return out;
  };
  return {{"name", op.name()},
          {"doc", op.doc()},
          {"attrs", attrs},
          {"inputs", ports(op.inputs())},
          {"outputs", ports(op.outputs())},
          {"random", op.random()},
          {"level", op.level() == ops::OpLevel::kBatch ? "batch" : "sample"},
          {"predicate", op.predicate()},
          {"elementwise", op.elementwise()},
          {"in_place", op.in_place()},
          {"whole_ranges", op.whole_ranges()},
          {"backends", BackendNames(registry, op)},
          {"registrant", registry.Registrant(op.name())}};
}

void PrintOp(const ops::OpRegistry& registry, const ops::OpSchema& op) {
  std::vector<std::string> tags = {absl::StrJoin(BackendNames(registry, op), ", ")};
  if (op.random()) tags.push_back("random");
  if (op.level() == ops::OpLevel::kBatch) tags.push_back("whole batches");
  if (op.predicate()) tags.push_back("filter predicate");
  if (op.elementwise()) tags.push_back("elementwise: after a distribute node, runs as batches arrive");
  if (op.in_place()) tags.push_back("in place on an unshared batch");
  if (op.whole_ranges()) tags.push_back("one call per runner's rows, not per tile");
  const std::string from = registry.Registrant(op.name());
  if (from != ops::kBuiltinRegistrant) tags.push_back("from " + from);
  std::printf("%s  [%s]\n  %s\n", op.name().c_str(), absl::StrJoin(tags, "; ").c_str(), op.doc().c_str());
  int name_width = 11;  // the attrs' names in one column, however long the longest
  for (const ops::AttrSchema& a : op.attrs()) name_width = std::max(name_width, static_cast<int>(a.name.size()));
  for (const ops::AttrSchema& a : op.attrs()) {
    const std::string allowed = a.Constraint();
    std::printf("    %-*s %-7s %-22s %s%s\n", name_width, a.name.c_str(),
                std::string(ops::AttrTypeName(a.type)).c_str(),
                a.default_json.empty() ? "(required)" : ("= " + a.default_json).c_str(), a.doc.c_str(),
                allowed.empty() ? "" : (" (" + allowed + ")").c_str());
  }
  for (const ops::PortSchema& p : op.inputs()) std::printf("    in  %-8s %s\n", p.name.c_str(), p.doc.c_str());
  for (const ops::PortSchema& p : op.outputs()) std::printf("    out %-8s %s\n", p.name.c_str(), p.doc.c_str());
  std::printf("\n");
}

absl::Status ListOps(const OpsArgs& args) {
  SLUICE_RETURN_IF_ERROR(LoadPlugins(args.plugins));
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  nlohmann::json all = nlohmann::json::array();
  bool found = false;
  for (const ops::OpSchema* op : registry.List()) {
    if (!args.only.empty() && op->name() != args.only) continue;
    found = true;
    if (args.json) {
      all.push_back(OpJson(registry, *op));
    } else {
      PrintOp(registry, *op);
    }
  }
  if (!found) {
    const std::string nearest = registry.NearestName(args.only);
    return absl::NotFoundError(absl::StrCat("no op named '", args.only, "'",
                                            nearest.empty() ? "" : absl::StrCat("; did you mean '", nearest, "'?"),
                                            "; run `sluice ops` for the list"));
  }
  if (args.json) std::printf("%s\n", all.dump(2).c_str());
  return absl::OkStatus();
}

}  // namespace

void AddOpsCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<OpsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "ops", "List the ops a pipeline can use: docs, attrs with defaults and allowed values, columns, backends");
  cmd->add_option("name", args->only, "show only this op");
  cmd->add_flag("--json", args->json, "print the ops as a JSON array");
  AddPluginOption(cmd, &args->plugins);
  cmd->callback([args, result] { *result = ListOps(*args); });
}

}  // namespace sluice::cli
