#include "sluice/profile/profiler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/object_store.h"
#include "sluice/ops/device_runtime.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/parse_example.h"
#include "sluice/profile/ablation.h"
#include "sluice/profile/gpu_tail.h"
#include "sluice/profile/materialize.h"

namespace sluice::profile {
namespace {

// The definition with its distribute node dropped: the profile measures
// the whole pipeline in this process.
PipelineDef InProcess(const PipelineDef& def, std::string* note) {
  PipelineDef out = def;
  out.clear_nodes();
  for (const NodeDef& n : def.nodes()) {
    if (n.has_distribute()) {
      *note = "the distribute node was left out: the whole pipeline was profiled in this process";
      continue;
    }
    *out.add_nodes() = n;
  }
  return out;
}

// The source alone: what reading (and parsing declared features) delivers.
// With a shard right after it (prefetches aside), with the shard too: the
// rank's rows are what the whole pipeline's rate counts, and the source
// reads only those where it can.
PipelineDef SourceOnly(const PipelineDef& def) {
  PipelineDef out = def;
  out.clear_nodes();
  *out.add_nodes() = def.nodes(0);
  int shard = 1;
  while (shard < def.nodes_size() && def.nodes(shard).has_prefetch()) ++shard;
  if (shard == def.nodes_size() || !def.nodes(shard).has_shard()) return out;
  for (int i = 1; i <= shard; ++i) *out.add_nodes() = def.nodes(i);
  return out;
}

// The shard of `whole` for `part` (SourceOnly's): each rank's rows are
// grouped by the batch after the shard, which `part` lacks.
void TakeShardOf(const graph::CompiledPipeline& whole, graph::CompiledPipeline* part) {
  auto shard = [](auto& nodes) {
    return std::find_if(nodes.begin(), nodes.end(),
                        [](const graph::CompiledNode& n) { return n.kind == graph::NodeKind::kShard; });
  };
  auto from = shard(whole.nodes);
  auto to = shard(part->nodes);
  if (from == whole.nodes.end() || to == part->nodes.end()) return;
  to->shard = from->shard;
  part->nodes.front().kept_by_shard = whole.nodes.front().kept_by_shard;
}

absl::StatusOr<RunMeasurement> Measure(const graph::CompiledPipeline& compiled, MeasureOptions options) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::FromCompiled(compiled));
  return MeasureRun(*pipeline, options);
}

// Each op's cost from the whole run, the source's reading as a first entry.
std::vector<OpCost> Costs(const graph::CompiledPipeline& compiled, const RunMeasurement& full) {
  std::vector<OpCost> ops;
  double compute_ns = 0;
  for (const exec::NodeStatsSnapshot& n : full.nodes) compute_ns += n.busy_ns;
  const double samples = std::max<int64_t>(1, full.nodes.empty() ? full.samples : full.nodes.back().rows);
  auto cost = [&](double ns, OpCost c) {
    c.core_s_per_1k = ns * 1e-9 / samples * 1000;
    c.cpu_share = compute_ns > 0 ? ns / compute_ns : 0;
    ops.push_back(std::move(c));
  };
  if (!full.nodes.empty()) {
    OpCost read;
    read.node_name = compiled.nodes[0].name;
    read.op_name = "read";
    read.op = -1;
    cost(full.nodes[0].busy_ns, read);
  }
  for (size_t i = 0; i < compiled.nodes.size() && i < full.nodes.size(); ++i) {
    const graph::CompiledNode& node = compiled.nodes[i];
    if (node.kind != graph::NodeKind::kMap) {
      // A shuffle, filter or batch computes too (a shuffle's moves of rows
      // were 29% of a pipeline's CPU): a row of its own, so the shares add
      // up and the verdict can name it.
      if (i == 0 || full.nodes[i].busy_ns <= 0) continue;
      OpCost c;
      c.node = static_cast<int>(i);
      c.op = -1;
      c.node_name = node.name;
      c.op_name = std::string(graph::NodeKindName(node.kind));
      cost(static_cast<double>(full.nodes[i].busy_ns), c);
      continue;
    }
    double in_ops = 0;
    for (size_t j = 0; j < node.ops.size(); ++j) {
      OpCost c;
      c.node = static_cast<int>(i);
      c.op = static_cast<int>(j);
      c.node_name = node.name;
      c.op_name = node.ops[j].name;
      c.view = node.ops[j].view;
      c.random = node.ops[j].inferred.random;
      in_ops += static_cast<double>(full.nodes[i].op_busy_ns[j]);
      cost(static_cast<double>(full.nodes[i].op_busy_ns[j]), c);
    }
    // Its own work beside the ops (allocating, assembling and handing on
    // its chunks): a quarter of the CPU of cheap ops on single samples.
    if (const double own = static_cast<double>(full.nodes[i].busy_ns) - in_ops; own > 0) {
      OpCost c;
      c.node = static_cast<int>(i);
      c.op = -1;
      c.node_name = node.name;
      c.op_name = "map";
      cost(own, c);
    }
  }
  return ops;
}

// Whole map nodes of deterministic ops right after the source (what
// `sluice materialize` writes out), and the per-sample maps before the
// batch node (what a distribute node there offloads).
void Prefixes(const graph::CompiledPipeline& compiled, const std::vector<OpCost>& ops, Findings* f) {
  std::vector<std::string> names;
  bool prefix = true;
  for (size_t i = 1; i < compiled.nodes.size(); ++i) {
    const graph::CompiledNode& node = compiled.nodes[i];
    if (node.kind == graph::NodeKind::kBatch) break;
    if (node.kind != graph::NodeKind::kMap) {
      prefix = false;
      continue;
    }
    bool deterministic = true;
    for (const graph::BoundOp& op : node.ops) deterministic &= !op.inferred.random && !op.inferred.draws_unseen;
    prefix &= deterministic;
    for (const OpCost& c : ops) {
      if (c.node != static_cast<int>(i)) continue;
      f->front_share += c.cpu_share;  // the map's own work too: its rows are offloaded with it
      if (c.op < 0) continue;
      // The rewritten pipeline parses its records again: no saving.
      const bool parse = node.ops[c.op].op == ops::kParseExampleOp;
      if (prefix && !parse) {
        f->materializable_share += c.cpu_share;
        if (!c.view) names.push_back(c.op_name);
      }
    }
    f->front_bytes_per_sample = static_cast<double>(node.output_schema.RowBytes());
  }
  f->materializable = absl::StrJoin(names, ", ");
}

// The ops from the last one without a cuda kernel (or the last filter,
// shuffle, repeat or take) to the end: what TailOnGpu moves to a cuda map.
void GpuTail(const graph::CompiledPipeline& compiled, const std::vector<OpCost>& ops, Findings* f) {
  const ops::OpRegistry& registry = compiled.registry ? *compiled.registry : ops::OpRegistry::Global();
  const ops::DeviceRuntime* cuda = registry.runtime(ops::Backend::kCuda);
  f->gpu_available = cuda != nullptr && cuda->CheckAvailable().ok();
  std::vector<const OpCost*> tail;
  int last_node = 0;
  for (const OpCost& c : ops) {
    if (c.op < 0) continue;
    for (int i = last_node + 1; i < c.node; ++i) {
      const graph::NodeKind kind = compiled.nodes[i].kind;
      if (kind != graph::NodeKind::kMap && kind != graph::NodeKind::kBatch && kind != graph::NodeKind::kPrefetch) {
        tail.clear();
      }
    }
    last_node = c.node;
    const graph::BoundOp& op = compiled.nodes[c.node].ops[c.op];
    if (!c.view && !registry.Runs(op.op, ops::Backend::kCuda)) {
      tail.clear();  // the tail starts after this op
    } else if (compiled.nodes[c.node].backend == ops::Backend::kCpu) {
      tail.push_back(&c);
    }
  }
  std::vector<std::string> names;
  for (const OpCost* c : tail) {
    f->gpu_tail_share += c->cpu_share;
    if (!c->view) names.push_back(c->op_name);
  }
  f->gpu_tail = absl::StrJoin(names, ", ");
}

// Whether the source reads objects from a store (s3://, gs://).
bool ReadsObjects(const graph::CompiledPipeline& compiled) {
  const graph::CompiledNode& source = compiled.nodes.front();
  if (source.kind != graph::NodeKind::kSource || source.format == nullptr) return false;
  for (const std::string& file : *source.format->files()) {
    if (io::IsObjectUrl(file)) return true;
  }
  return false;
}

// Each cpu op's "without it" rate (Findings::ops' ablated_samples_per_s).
absl::Status MeasureAblations(const graph::CompiledPipeline& compiled, const MeasureOptions& short_options,
                              double short_seconds, const std::function<void(const std::string&)>& progress,
                              Findings* f) {
  // Stand-ins run on the cpu: ops of device maps keep their place.
  auto ablatable_op = [&](const OpCost& c) {
    return !c.view && c.op >= 0 && compiled.nodes[c.node].backend == ops::Backend::kCpu;
  };
  int ablatable = 0, done = 0;
  for (const OpCost& c : f->ops) ablatable += ablatable_op(c) ? 1 : 0;
  // Each ablation's short run against a short run of the whole, scaled to
  // the full run's rate: a short run's start (a cold pool, the first
  // splits) weighs more, and taken as it was it predicted W2 without its
  // blur at 187k samples/s, below the whole's 299k (it runs at 389k).
  // The whole is measured before the ablations and again after them, and
  // their mean taken: on a busy host one run of it drifted from the
  // ablations' (a warp's gain measured 1.0x to 1.8x from run to run).
  if (ablatable == 0) return absl::OkStatus();
  progress(absl::StrCat("the whole pipeline, as each op's run (", short_seconds, " s)"));
  SLUICE_ASSIGN_OR_RETURN(const RunMeasurement before, Measure(compiled, short_options));
  std::vector<std::pair<OpCost*, double>> rates;
  for (OpCost& c : f->ops) {
    if (!ablatable_op(c)) continue;
    progress(absl::StrCat("without ", c.op_name, " (", ++done, "/", ablatable, ")"));
    graph::CompiledPipeline ablated = compiled;
    SLUICE_RETURN_IF_ERROR(AblateOp(&ablated, c.node, c.op));
    SLUICE_ASSIGN_OR_RETURN(RunMeasurement m, Measure(ablated, short_options));
    rates.emplace_back(&c, m.samples_per_s);
  }
  progress(absl::StrCat("the whole pipeline again (", short_seconds, " s)"));
  SLUICE_ASSIGN_OR_RETURN(const RunMeasurement after, Measure(compiled, short_options));
  const double whole = (before.samples_per_s + after.samples_per_s) / 2;
  for (auto& [c, rate] : rates) {
    // Doing less never runs slower: a rate under the whole's is noise.
    c->ablated_samples_per_s = whole > 0 ? std::max(f->samples_per_s, f->samples_per_s * rate / whole) : rate;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProfileResult> RunProfile(const PipelineDef& def, const ProfileOptions& options,
                                         const std::function<void(const std::string&)>& progress) {
  ProfileResult result;
  const PipelineDef local = InProcess(def, &result.note);
  SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline compiled, graph::Compile(local));
  Findings& f = result.findings;
  f.pipeline = compiled.name.empty() ? "pipeline" : compiled.name;
  f.threads = compiled.threads;
  f.consumer_samples_per_s = options.consumer_samples_per_s;
  f.target_samples_per_s = options.target_samples_per_s;

  progress(absl::StrCat("the whole pipeline (", options.seconds, " s)"));
  exec::TraceBuffer trace;
  MeasureOptions full_options;
  full_options.min_seconds = options.seconds;
  full_options.cancelled = options.cancelled;
  full_options.trace = options.trace ? &trace : nullptr;
  SLUICE_ASSIGN_OR_RETURN(result.full, Measure(compiled, full_options));
  if (options.trace) {
    result.spans = trace.spans();
    result.dropped_spans = trace.dropped();
  }
  f.samples_per_s = result.full.samples_per_s;
  f.cpu_s_per_sample = result.full.samples > 0 ? result.full.cpu_seconds / result.full.samples : 0;
  f.ops = Costs(compiled, result.full);
  Prefixes(compiled, f.ops, &f);
  if (!ReadsBackInOrder(local, compiled)) {  // `sluice materialize` would refuse it
    f.materializable_share = 0;
    f.materializable.clear();
  }
  GpuTail(compiled, f.ops, &f);
  f.uncached_objects = !local.nodes(0).source().has_object_cache() && ReadsObjects(compiled);

  MeasureOptions short_options;
  short_options.min_seconds = options.short_seconds;
  short_options.cancelled = options.cancelled;
  progress(absl::StrCat("the source alone (", options.short_seconds, " s)"));
  SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline source_only, graph::Compile(SourceOnly(local)));
  TakeShardOf(compiled, &source_only);
  SLUICE_ASSIGN_OR_RETURN(RunMeasurement input, Measure(source_only, short_options));
  f.input_only_samples_per_s = input.samples_per_s;

  if (f.gpu_available && f.gpu_tail_share >= 0.1) {
    absl::StatusOr<PipelineDef> gpu = TailOnGpu(local, *compiled.registry);
    if (gpu.ok()) {
      progress(absl::StrCat("the tail on the GPU (", options.short_seconds, " s)"));
      SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline on_gpu, graph::Compile(*gpu));
      SLUICE_ASSIGN_OR_RETURN(RunMeasurement m, Measure(on_gpu, short_options));
      f.gpu_tail_samples_per_s = m.samples_per_s;
    }
  }

  if (options.ablation) {
    SLUICE_RETURN_IF_ERROR(MeasureAblations(compiled, short_options, options.short_seconds, progress, &f));
  }
  if (options.consumer_samples_per_s > 0) {
    progress(absl::StrCat("consumed at the trainer's ", ShortRate(options.consumer_samples_per_s), " samples/s"));
    MeasureOptions paced = short_options;
    paced.consumer_samples_per_s = options.consumer_samples_per_s;
    SLUICE_ASSIGN_OR_RETURN(RunMeasurement m, Measure(compiled, paced));
    f.paced_wait_share = m.consumer_wait_share;
  }
  result.verdict = Analyze(f);
  return result;
}

}  // namespace sluice::profile
