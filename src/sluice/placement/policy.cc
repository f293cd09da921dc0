#include "sluice/placement/policy.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::placement {
namespace {

// Below this share of the compute a lever moves too little to pay for
// the move.
constexpr double kWorthwhileShare = 0.2;

std::string Key(const Placement& p) {
  return absl::StrCat(p.threads, "/", p.local_workers, "/", p.service_workers, "/", p.gpu_tail, "/", p.keep_prefix);
}

// What tells a new phase of the job: the trainer's rate, but for a
// trainer that mostly waits, whose own rate the job's barely shows (and
// noise in its wait multiplies), the job's: the loader's.
double Demand(const Measurements& m) { return m.rate / std::max(1 - m.wait_share, 0.5); }

// "46,667 samples/s": a judge's figures to the sample.
std::string Rate(double r) {
  std::string digits = absl::StrFormat("%.0f", r);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0 && std::isdigit(digits[i - 1]); i -= 3) {
    digits.insert(i, ",");
  }
  return absl::StrCat(digits, " samples/s");
}

}  // namespace

std::string Placement::Describe() const {
  const std::string here = absl::StrCat(threads, " thread", threads > 1 ? "s" : "");
  std::string out =
      local_workers > 0 ? absl::StrCat(local_workers, " local worker process", local_workers > 1 ? "es" : "",
                                       ", the rest in the trainer's process on ", here)
      : service_workers ? absl::StrCat("the dispatcher's workers, the rest in the trainer's process on ", here)
                        : absl::StrCat("in the trainer's process on ", here);
  if (gpu_tail) absl::StrAppend(&out, ", the tail on the GPU");
  if (keep_prefix) absl::StrAppend(&out, ", the deterministic prefix kept");
  return out;
}

Measurements Average(const std::vector<Measurements>& windows) {
  Measurements mean = windows.back();
  double seconds = 0, rows = 0, wait = 0, process = 0, engine = 0;
  for (const Measurements& w : windows) {
    seconds += w.seconds;
    rows += w.rate * w.seconds;
    wait += w.wait_share * w.seconds;
    process += w.process_cores * w.seconds;
    engine += w.engine_cores * w.seconds;
  }
  mean.seconds = seconds;
  mean.rate = rows / seconds;
  mean.wait_share = wait / seconds;
  mean.process_cores = process / seconds;
  mean.engine_cores = engine / seconds;
  mean.cpu_s_per_sample = rows > 0 ? engine / rows : 0;
  return mean;
}

double TrainerRate(const Measurements& m) { return m.rate / std::max(1 - m.wait_share, 0.02); }
double TrainerCores(const Measurements& m) { return std::max(0.0, m.process_cores - m.engine_cores); }

Policy::Policy(Placement start, Levers levers, Options options) : levers_(levers), options_(options), current_(start) {
  Settle();
}

std::vector<Candidate> Policy::Candidates(const Measurements& m) const {
  std::vector<Candidate> out;
  const double trainer = TrainerRate(m), trainer_cores = TrainerCores(m);
  const double free_cores = std::max(0.5, m.cores - trainer_cores);
  const bool loader_bound = m.wait_share >= options_.loader_bound_wait;
  // What `threads` in this process make of the cores the trainer leaves,
  // and what the job then takes.
  auto capacity = [&](int threads) {
    return m.cpu_s_per_sample > 0 ? std::min<double>(threads, free_cores) / m.cpu_s_per_sample : 0.0;
  };
  auto in_process = [&](int threads) { return std::min(trainer, capacity(threads)); };
  const bool in_proc = current_.in_process();
  // First among moves of equal predicted rates: it spends less CPU for
  // every sample, where fewer threads only spread the same work thinner.
  AddKeepPrefix(m, &out);
  if (levers_.threads && in_proc && loader_bound && current_.threads < m.cores) {
    Placement p = current_;
    p.threads = m.cores;
    out.push_back({p, in_process(m.cores),
                   absl::StrFormat("the trainer waits %.0f%% of its time and %d of %d cores compute for the pipeline",
                                   100 * m.wait_share, current_.threads, m.cores)});
  }
  const int leave_trainer = std::max(1, static_cast<int>(std::lround(m.cores - trainer_cores)));
  if (levers_.threads && in_proc && m.wait_share < options_.fed_wait && trainer_cores >= 0.5 &&
      leave_trainer < current_.threads && capacity(leave_trainer) >= 1.1 * m.rate) {
    Placement p = current_;
    p.threads = leave_trainer;
    out.push_back({p, m.rate,
                   absl::StrFormat("the trainer is fed (waits %.0f%%) and computes on %.1f cores: %d thread%s "
                                   "still make%s %s, leaving it its cores",
                                   100 * m.wait_share, trainer_cores, leave_trainer, leave_trainer > 1 ? "s" : "",
                                   leave_trainer > 1 ? "" : "s", Rate(capacity(leave_trainer)))});
  }
  if (levers_.local_workers && in_proc && loader_bound && trainer_cores >= 0.5 && free_cores >= 2 &&
      m.worker_ring_bytes <= m.memory_free_bytes) {
    Placement p = current_;
    p.local_workers = 1;
    out.push_back({p, 0,
                   absl::StrFormat("the trainer waits %.0f%% and computes on %.1f cores beside the pipeline's "
                                   "threads; a worker process's gain is measured by trying it",
                                   100 * m.wait_share, trainer_cores)});
  }
  // More CPUs than this machine's: after the moves that stay on it (a
  // candidate of its own, as a local worker's gain is not predictable).
  if (levers_.service_workers && in_proc && !current_.keep_prefix && loader_bound) {
    Placement p = current_;
    p.service_workers = true;
    out.push_back({p, 0,
                   absl::StrFormat("the trainer waits %.0f%% with %.1f of %d cores busy; the dispatcher's workers' "
                                   "gain is measured by trying it, and its autoscaling signal asks for the workers "
                                   "the job needs",
                                   100 * m.wait_share, m.process_cores, m.cores)});
  }
  if (!in_proc) {
    Placement p = current_;
    p.local_workers = 0;
    p.service_workers = false;
    out.push_back({p, 0, "the pipeline back in the trainer's process: measured by trying it"});
  }
  if (levers_.gpu_tail && !current_.gpu_tail && loader_bound && m.gpu_tail_share >= kWorthwhileShare) {
    Placement p = current_;
    p.gpu_tail = true;
    out.push_back({p, std::min(trainer, m.rate / (1 - m.gpu_tail_share)),
                   absl::StrFormat("the ops a GPU runs are %.0f%% of the compute", 100 * m.gpu_tail_share)});
  }
  // Predicted gains first, then what only a trial can rate.
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return (a.predicted_rate == 0 ? -1 : a.predicted_rate) > (b.predicted_rate == 0 ? -1 : b.predicted_rate);
  });
  return out;
}

void Policy::AddKeepPrefix(const Measurements& m, std::vector<Candidate>* out) const {
  // A kept prefix lies on this machine's disk, out of a dispatcher's workers' reach.
  if (!levers_.keep_prefix || current_.keep_prefix || current_.service_workers || !m.epochs_repeat ||
      m.prefix_share < kWorthwhileShare || m.prefix_bytes > m.prefix_room_bytes / 2) {
    return;
  }
  Placement p = current_;
  p.keep_prefix = true;
  const std::string kept = absl::StrFormat(
      "the deterministic prefix is %.0f%% of the compute and epochs repeat (%.0f MB to write once, "
      "%.0f MB free on its disk)",
      100 * m.prefix_share, m.prefix_bytes / 1e6, m.prefix_room_bytes / 1e6);
  if (m.wait_share >= options_.loader_bound_wait) {
    out->push_back({p, std::min(TrainerRate(m), m.rate / (1 - m.prefix_share)), kept});
  } else if (m.wait_share < options_.fed_wait && TrainerCores(m) >= 0.5) {
    // The same rate for less of the CPU the trainer computes on.
    out->push_back({p, m.rate,
                    absl::StrFormat("the trainer is fed (waits %.0f%%) and computes on %.1f cores beside the "
                                    "pipeline; %s",
                                    100 * m.wait_share, TrainerCores(m), kept)});
  }
}

bool Frees(const Placement& to, const Placement& from) {
  return to.local_workers == from.local_workers && to.service_workers == from.service_workers &&
         (to.threads < from.threads || (to.keep_prefix && !from.keep_prefix));
}

bool Policy::Tried(const Placement& p) const { return tried_.count(Key(p)) > 0; }

Decision Policy::Observe(const Measurements& window) {
  if (settling_ > 0) {
    --settling_;
    return {current_, "settling after a move", {}, false};
  }
  windows_.push_back(window);
  if (static_cast<int>(windows_.size()) < options_.measure_windows) return {current_, "measuring", {}, false};
  const Measurements m = Average(windows_);
  windows_.clear();
  if (trial_) return Judge(m);
  const double trainer = Demand(m);
  const bool changed = trainer_rate_ > 0 && std::abs(trainer / trainer_rate_ - 1) > options_.change;
  trainer_rate_ = trainer;
  if (changed) {
    // Its windows may straddle the change: rated again before any move.
    Forget();
    return {current_, "the trainer's rate changed: rating the placement again", {}, false};
  }
  tried_[Key(current_)] = m.rate;
  Decision d{current_, "", Candidates(m), false};
  for (const Candidate& c : d.alternatives) {
    if (Tried(c.placement)) continue;
    const bool frees = Frees(c.placement, current_);
    if (c.predicted_rate == 0 || frees || c.predicted_rate >= m.rate * (1 + options_.min_gain))
      return Move(c, m, d.alternatives);
  }
  d.reason = absl::StrFormat("stays %s at %s (the trainer waits %.0f%%): no move predicted to gain %.0f%%",
                             current_.Describe(), Rate(m.rate), 100 * m.wait_share, 100 * options_.min_gain);
  return d;
}

Decision Policy::Move(Candidate c, const Measurements& m, std::vector<Candidate> alternatives) {
  before_ = current_;
  before_rate_ = m.rate;
  current_ = c.placement;
  trial_ = true;
  Settle();
  std::string reason =
      absl::StrCat("moves to ", current_.Describe(), " from ", before_.Describe(), " at ", Rate(m.rate), ": ", c.why);
  if (c.predicted_rate > 0) absl::StrAppend(&reason, "; predicted ", Rate(c.predicted_rate));
  log_.push_back(reason);
  return {current_, reason, std::move(alternatives), false};
}

Decision Policy::Judge(const Measurements& m) {
  trial_ = false;
  tried_[Key(current_)] = m.rate;
  // A move that frees cores is kept unless it costs; one that spends more
  // is kept only when it pays.
  const bool frees = Frees(current_, before_);
  const double needed = before_rate_ * (frees ? 1 - options_.min_gain : 1 + options_.min_gain);
  if (m.rate >= needed) {
    trainer_rate_ = Demand(m);
    std::string reason =
        absl::StrCat("keeps ", current_.Describe(), ": ", Rate(m.rate), " against ", Rate(before_rate_), " before");
    log_.push_back(reason);
    return {current_, reason, {}, false};
  }
  std::string reason = absl::StrCat("undoes ", current_.Describe(), ": ", Rate(m.rate), " against ", Rate(before_rate_),
                                    " before; back to ", before_.Describe());
  log_.push_back(reason);
  current_ = before_;
  Settle();
  return {current_, reason, {}, true};
}

void Policy::Refuse(const std::string& why) {
  tried_[Key(current_)] = 0;
  log_.push_back(absl::StrCat("refused: ", why));
  if (!trial_) return;
  trial_ = false;
  current_ = before_;
  Settle();
}

void Policy::Withdraw(const std::string& why) {
  levers_.keep_prefix = false;
  log_.push_back(absl::StrCat("refused: ", why));
  Leave(&Placement::keep_prefix);
}

void Policy::LoseService(const std::string& why) {
  log_.push_back(
      absl::StrCat("the dispatcher's workers were lost (", why, "): the epoch goes on in the trainer's process"));
  if (current_.service_workers) tried_[Key(current_)] = 0;
  Leave(&Placement::service_workers);
}

void Policy::Leave(bool Placement::* lever) {
  if (!(current_.*lever)) return;
  if (trial_) {
    trial_ = false;
    current_ = before_;
  } else {
    current_.*lever = false;
  }
  Settle();
}

void Policy::Settle() {
  settling_ = options_.settle_windows;
  windows_.clear();
}

void Policy::Forget() {
  tried_.clear();
  log_.push_back("the trainer's rate changed: every placement may be tried again");
}

}  // namespace sluice::placement
