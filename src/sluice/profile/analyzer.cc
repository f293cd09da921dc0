#include "sluice/profile/analyzer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::profile {
namespace {

// The pipeline counts as keeping up when it delivers this share of what the
// trainer takes; reading counts as the bound when reading alone is at most
// this much faster than the whole pipeline.
constexpr double kKeepsUp = 0.98;
constexpr double kReadingBound = 1.25;
// The share of the pipeline's threads on the CPU from which its cores count
// as taken.
constexpr double kBusyCores = 0.85;

std::string Percent(double share) { return absl::StrFormat("%.0f%%", 100 * share); }

const OpCost* Costliest(const std::vector<OpCost>& ops) {
  const OpCost* best = nullptr;
  for (const OpCost& op : ops) {
    if (best == nullptr || op.cpu_share > best->cpu_share) best = &op;
  }
  return best;
}

// A local copy of the objects the source reads every epoch, when their
// reading is worth it: the pipeline's bound, or at least `min_share` of its
// CPU (an object's bytes cost more CPU than a local file's).
void AddObjectCacheLever(const Findings& f, double min_share, Verdict* v) {
  if (!f.uncached_objects) return;
  double reading = 0;
  for (const OpCost& op : f.ops) reading += op.op < 0 && op.node == 0 ? op.cpu_share : 0;
  if (reading < min_share) return;
  v->levers.push_back(Lever{
      "keep a local copy of the objects (the source's object_cache {dir, max_bytes}): epochs after the first read "
      "local disk",
      0,
      absl::StrCat("the source reads its objects from the store every epoch; reading is ", Percent(reading),
                   " of the CPU")});
}

void AddComputeLevers(const Findings& f, double target, Verdict* v) {
  AddObjectCacheLever(f, 0.1, v);
  const double cores = std::max(1, f.threads);
  // What a sample takes of the pipeline's threads: its CPU, or more where
  // its ops wait (a Python op that sleeps, a read waiting on a store),
  // which more cores or workers would run side by side all the same.
  const double c = f.samples_per_s > 0 ? std::max(f.cpu_s_per_sample, cores / f.samples_per_s) : f.cpu_s_per_sample;
  if (f.materializable_share >= 0.05 && f.materializable_share < 1) {
    const double predicted = std::min(f.samples_per_s / (1 - f.materializable_share),
                                      f.input_only_samples_per_s > 0 ? f.input_only_samples_per_s : 1e18);
    v->levers.push_back(Lever{
        absl::StrCat("materialize ", f.materializable, " (sluice materialize): done once, not every epoch"), predicted,
        absl::StrCat("they are ", Percent(f.materializable_share), " of the CPU and draw no random numbers")});
  }
  if (f.front_share >= 0.2 && c > 0) {
    // The client keeps the rest and receives the front's output; each
    // worker (as many cores as here) runs the front.
    const double client_cost = c * (1 - f.front_share) + f.front_bytes_per_sample * kClientCpuSecondsPerByte;
    const double client_limit = cores / client_cost;
    const double per_worker = cores / (c * f.front_share);
    const double want = std::min(target > 0 ? target : client_limit, client_limit);
    const int workers = std::max(1, static_cast<int>(std::ceil(want / per_worker)));
    const double predicted = std::min(client_limit, workers * per_worker);
    if (predicted > f.samples_per_s * 1.05) {
      v->levers.push_back(Lever{
          absl::StrCat("offload the per-sample front (", Percent(f.front_share), " of the CPU) to ", workers,
                       workers == 1 ? " worker" : " workers", " of ", cores,
                       " cores (a distribute node before the batch)"),
          predicted,
          absl::StrFormat("the client then runs the rest and receives %.0f bytes a sample", f.front_bytes_per_sample)});
    }
  }
  if (f.gpu_tail_share >= 0.1 && f.gpu_tail_share < 1 && c > 0) {
    // The CPU keeps the rest; the kernels run at millions of samples a
    // second (bench/RESULTS.md), far from binding.
    const double predicted = f.gpu_tail_samples_per_s > 0
                                 ? f.gpu_tail_samples_per_s
                                 : std::min(cores / (c * (1 - f.gpu_tail_share)),
                                            f.input_only_samples_per_s > 0 ? f.input_only_samples_per_s : 1e18);
    if (predicted > f.samples_per_s * 1.05) {
      v->levers.push_back(
          Lever{absl::StrCat("move ", f.gpu_tail, " (", Percent(f.gpu_tail_share),
                             " of the CPU) to the GPU: a map with device \"cuda\" after the batch"),
                predicted,
                absl::StrCat("they have cuda kernels; uint8 crosses PCIe and the CPU keeps the rest",
                             f.gpu_tail_samples_per_s > 0 ? " (measured here on the GPU)"
                             : f.gpu_available ? ""
                                               : " (needs a CUDA build of sluice and a GPU; this process has none)")});
    }
  }
  if (target > f.samples_per_s && c > 0 && std::ceil(target * c) > f.threads) {
    const double needed = target * c;
    // A sample that holds a thread longer than its CPU waits (a Python op
    // that sleeps, a store, a map held to fewer threads): say both.
    const std::string why =
        c > f.cpu_s_per_sample * 1.1
            ? absl::StrFormat("a sample holds a thread %.1f µs, %.1f of them on the CPU; threads overlap the rest",
                              c * 1e6, f.cpu_s_per_sample * 1e6)
            : absl::StrFormat("%.1f core-µs per sample", c * 1e6);
    // More cores go no faster than the source reads.
    const double reachable = f.input_only_samples_per_s > 0 ? std::min(target, f.input_only_samples_per_s) : target;
    const std::string capped =
        reachable < target ? absl::StrCat("; reading caps it at ", ShortRate(reachable), " samples/s") : "";
    v->levers.push_back(Lever{absl::StrFormat("run on %.0f cores instead of %d", std::ceil(reachable * c), f.threads),
                              reachable, why + capped});
  }
  const OpCost* best = nullptr;
  for (const OpCost& op : f.ops) {
    if (op.ablated_samples_per_s > 0 && (best == nullptr || op.ablated_samples_per_s > best->ablated_samples_per_s)) {
      best = &op;
    }
  }
  if (best != nullptr && best->ablated_samples_per_s > f.samples_per_s * 1.2) {
    v->levers.push_back(Lever{absl::StrCat("make ", best->op_name, " cheaper or drop it"), best->ablated_samples_per_s,
                              "measured with it stood in for by an identity"});
  }
}

}  // namespace

std::string ShortRate(double r) {
  if (r >= 1e6) return absl::StrFormat("%.1fM", r / 1e6);
  if (r >= 1e4) return absl::StrFormat("%.0fk", r / 1e3);
  if (r >= 1e3) return absl::StrFormat("%.1fk", r / 1e3);
  return absl::StrFormat("%.0f", r);
}

Verdict Analyze(const Findings& f) {
  Verdict v;
  const double trainer = f.consumer_samples_per_s;
  const double target = f.target_samples_per_s > 0 ? f.target_samples_per_s : trainer;
  const std::string pipeline = absl::StrCat("pipeline ", ShortRate(f.samples_per_s), " samples/s");
  const OpCost* costliest = Costliest(f.ops);
  const std::string cost_note =
      costliest && costliest->cpu_share > 0
          ? absl::StrCat("; ", costliest->op_name, " is ", Percent(costliest->cpu_share), " of CPU")
          : "";

  if (trainer > 0 && f.samples_per_s >= kKeepsUp * trainer) {
    v.bound = Verdict::Bound::kTrainer;
    v.bottleneck = "the trainer";
    v.summary = absl::StrFormat(
        "trainer-bound: %s, the trainer takes %s; the input keeps up with %.1fx to spare (the trainer "
        "waited %s of its time when paced at its rate)%s",
        pipeline, ShortRate(trainer), f.samples_per_s / trainer, Percent(f.paced_wait_share), cost_note);
    if (f.cpu_s_per_sample > 0) {
      const double cores = trainer * f.cpu_s_per_sample;
      v.levers.push_back(Lever{absl::StrFormat("give the input %.0f of %d cores and the rest to the trainer",
                                               std::max(1.0, std::ceil(cores)), f.threads),
                               trainer, absl::StrFormat("%.1f core-µs per sample", f.cpu_s_per_sample * 1e6)});
    }
    return v;
  }

  std::string head;
  if (trainer > 0) {
    head = absl::StrFormat(
        "input-bound: %s, the trainer %s; the trainer waits %s of its time, and with a cached "
        "batch it would run at %s (%.1fx)",
        pipeline, ShortRate(trainer),
        Percent(f.paced_wait_share > 0 ? f.paced_wait_share : 1 - f.samples_per_s / trainer), ShortRate(trainer),
        trainer / f.samples_per_s);
  } else {
    head = absl::StrCat(pipeline, " (give the trainer's rate, --consumer-rate or consumer_rate=, to compare)");
  }
  if (f.input_only_samples_per_s > 0 && f.input_only_samples_per_s <= kReadingBound * f.samples_per_s) {
    v.bound = Verdict::Bound::kReading;
    v.bottleneck = "reading";
    v.summary = absl::StrCat(head, "; bound by reading: the source alone (reading and parsing) delivers ",
                             ShortRate(f.input_only_samples_per_s), " samples/s", cost_note);
    AddObjectCacheLever(f, 0, &v);
    // Reading that keeps the cores busy gains nothing from more splits read
    // at once: on 2 busy cores parallel_reads 2 ran 1.4x slower.
    const double busy = f.threads > 0 ? f.cpu_s_per_sample * f.samples_per_s / f.threads : 0;
    v.levers.push_back(
        busy < kBusyCores
            ? Lever{"read faster: more splits read at once (the source's parallel_reads), faster storage, or a local "
                    "copy",
                    0, "the ops are not what limits the rate"}
            : Lever{"read less: only the features and columns the ops use, or fewer bytes a record (reading and "
                    "parsing take the cores: more splits at once would compete for them)",
                    0, absl::StrCat("the pipeline's threads are ", Percent(std::min(busy, 1.0)), " busy")});
    return v;
  }
  v.bound = Verdict::Bound::kCompute;
  v.bottleneck = costliest ? costliest->op_name : "compute";
  v.summary = absl::StrCat(head, cost_note.empty() ? "; bound by compute" : cost_note,
                           f.input_only_samples_per_s > 0
                               ? absl::StrCat(" (reading alone: ", ShortRate(f.input_only_samples_per_s), "/s)")
                               : "");
  AddComputeLevers(f, target, &v);
  return v;
}

}  // namespace sluice::profile
