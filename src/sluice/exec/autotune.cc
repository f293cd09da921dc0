#include "sluice/exec/autotune.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sluice/exec/thread_start.h"

namespace sluice::exec {
namespace {

// Pressure below which a knob is not worth raising, and above whose
// negative it is not worth lowering: moves the model gives no reason for
// are not tried (each trial runs a worse setting for a while).
constexpr double kMinPressure = 0.05;

const char* KindName(Knob::Kind kind) { return kind == Knob::Kind::kParallelism ? "parallelism" : "depth"; }

}  // namespace

Autotuner::Autotuner(std::vector<Knob> knobs, Options options)
    : knobs_(std::move(knobs)), options_(options), pressure_sum_(knobs_.size(), 0.0) {
  if (knobs_.empty()) phase_ = Phase::kConverged;
  FitToBudget();
}

int64_t Autotuner::Bytes(const Move& move) const {
  int64_t bytes = 0;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    bytes += (i == move.knob ? knobs_[i].value + move.delta : knobs_[i].value) * knobs_[i].bytes_per_unit;
  }
  return bytes;
}

// Only depths are lowered: a queue's places each hold a whole element,
// while a map's runners may share one chunk (its ranges) and wait for room
// themselves when they would pass the budget.
void Autotuner::FitToBudget() {
  while (Bytes() > options_.ram_budget_bytes) {
    Knob* cut = nullptr;
    for (Knob& k : knobs_) {
      if (k.kind != Knob::Kind::kDepth || k.value <= k.min || k.bytes_per_unit <= 0) continue;
      if (cut == nullptr || k.value * k.bytes_per_unit > cut->value * cut->bytes_per_unit) cut = &k;
    }
    if (cut == nullptr) return;
    log_.push_back(absl::StrFormat("%s %s %d -> %d: the setting holds %d bytes, past the memory budget of %d",
                                   cut->node_name, KindName(cut->kind), cut->value, cut->value - 1, Bytes(),
                                   options_.ram_budget_bytes));
    --cut->value;
  }
}

std::string Autotuner::Key() const {
  std::string key;
  for (const Knob& k : knobs_) absl::StrAppend(&key, k.value, ",");
  return key;
}

std::string Autotuner::Describe(const Move& move) const {
  const Knob& k = knobs_[move.knob];
  return absl::StrCat(k.node_name, " ", KindName(k.kind), " ", k.value, " -> ", k.value + move.delta);
}

bool Autotuner::Fits(const Move& move) const {
  const Knob& k = knobs_[move.knob];
  const int64_t value = k.value + move.delta;
  if (value < k.min || value > k.max) return false;
  return move.delta < 0 || Bytes(move) <= options_.ram_budget_bytes;
}

bool Autotuner::NextMove(const std::vector<double>& pressure, Move* move) const {
  struct Candidate {
    double priority;
    Move move;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    if (pressure[i] > kMinPressure) candidates.push_back({pressure[i], {i, +1}});
    if (pressure[i] < -kMinPressure) candidates.push_back({-pressure[i], {i, -1}});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.priority > b.priority; });
  const std::string key = Key();
  for (const Candidate& c : candidates) {
    if (!Fits(c.move)) continue;
    if (tried_.count(absl::StrCat(key, c.move.knob, c.move.delta > 0 ? "+" : "-")) > 0) continue;
    *move = c.move;
    return true;
  }
  return false;
}

const std::vector<Knob>& Autotuner::Step(const Interval& interval) {
  if (phase_ == Phase::kConverged) return knobs_;
  if (phase_ == Phase::kSettle) {
    if (++intervals_in_phase_ >= options_.settle_intervals) {
      phase_ = trial_.delta != 0 ? Phase::kMeasureTrial : Phase::kMeasureBase;
      intervals_in_phase_ = 0;
      rate_sum_ = 0;
      std::fill(pressure_sum_.begin(), pressure_sum_.end(), 0.0);
    }
    return knobs_;
  }
  rate_sum_ += interval.rate;
  for (size_t i = 0; i < knobs_.size() && i < interval.pressure.size(); ++i) {
    pressure_sum_[i] += interval.pressure[i];
  }
  if (++intervals_in_phase_ < options_.measure_intervals) return knobs_;

  const double rate = rate_sum_ / intervals_in_phase_;
  std::vector<double> pressure(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) pressure[i] = pressure_sum_[i] / intervals_in_phase_;
  if (phase_ == Phase::kMeasureBase) {
    base_rate_ = rate;
    best_rate_ = rate;
    base_pressure_ = pressure;
  } else {  // judge the trial
    const Move tried = trial_;
    knobs_[tried.knob].value -= tried.delta;
    const std::string from = Key();
    tried_.insert(absl::StrCat(from, tried.knob, tried.delta > 0 ? "+" : "-"));
    // A knob raised must pay for itself; one lowered (RAM or cores given
    // back) may cost a little, but never more than that below the best.
    const bool better =
        tried.delta > 0 ? rate >= base_rate_ * (1 + options_.min_gain) : rate >= best_rate_ * (1 - options_.min_gain);
    log_.push_back(absl::StrFormat("%s: %.0f rows/s against %.0f: %s", Describe(tried), rate, base_rate_,
                                   better ? "kept" : "put back"));
    if (better) {
      knobs_[tried.knob].value += tried.delta;
      base_rate_ = rate;
      best_rate_ = std::max(best_rate_, rate);
      base_pressure_ = pressure;
    }
  }
  trial_ = Move{0, 0};
  Move next;
  if (!NextMove(base_pressure_, &next)) {
    phase_ = Phase::kConverged;
    return knobs_;
  }
  trial_ = next;
  knobs_[next.knob].value += next.delta;
  phase_ = Phase::kSettle;
  intervals_in_phase_ = 0;
  return knobs_;
}

AutotuneThread::AutotuneThread(const PipelineStats* stats, std::vector<NodeKnobs*> knobs,
                               std::shared_ptr<SharedAutotuner> shared, int64_t interval_ns)
    : stats_(stats), node_knobs_(std::move(knobs)), shared_(std::move(shared)), interval_ns_(interval_ns) {
  {
    // The tuner's phase goes on: epochs can be shorter than a measurement,
    // and the start of each costs every setting alike.
    absl::MutexLock lock(&shared_->mu);
    Apply(shared_->tuner.knobs());
  }
  thread_ = TryStartThread([this] { Run(); });  // refused by the system: the knobs stay as they are
}

AutotuneThread::~AutotuneThread() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  shared_->in_use.store(false);
}

std::vector<Knob> AutotuneThread::knobs() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->tuner.knobs();
}

std::vector<std::string> AutotuneThread::log() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->tuner.log();
}

void AutotuneThread::Apply(const std::vector<Knob>& setting) {
  for (size_t i = 0; i < setting.size(); ++i) {
    if (setting[i].kind == Knob::Kind::kParallelism) {
      node_knobs_[i]->parallelism.store(static_cast<int>(setting[i].value), std::memory_order_relaxed);
    } else {
      node_knobs_[i]->depth.store(setting[i].value, std::memory_order_relaxed);
    }
  }
}

Interval AutotuneThread::Measure(const PipelineStatsSnapshot& before, const PipelineStatsSnapshot& now) const {
  Interval out;
  const double dt = static_cast<double>(now.at_ns - before.at_ns);
  if (dt <= 0) return out;
  out.rate = static_cast<double>(now.nodes.back().rows - before.nodes.back().rows) / dt * 1e9;
  const std::vector<Knob> knobs = this->knobs();
  // CPU in use across the pipeline, against its thread count: a busy map
  // gains from more runners only while cores are left.
  int threads = 0;
  double busy = 0;
  for (size_t i = 0; i < now.nodes.size(); ++i) busy += now.nodes[i].busy_ns - before.nodes[i].busy_ns;
  for (const Knob& k : knobs) {
    if (k.kind == Knob::Kind::kParallelism) threads = std::max(threads, static_cast<int>(k.max));
  }
  const double cpu_free = threads > 0 ? std::max(0.0, 1 - busy / (dt * threads)) : 0;
  // More runners than cores, with the cores busy: runners preempt each
  // other (each batch's ranges cut finer, caches shared); lowering a map's
  // runners, the lightest first, is worth a try.
  int64_t runners = 0;
  for (const Knob& k : knobs) runners += k.kind == Knob::Kind::kParallelism ? k.value : 0;
  const double oversubscribed = threads > 0 ? std::max(0.0, static_cast<double>(runners) / threads - 1) : 0;
  const double consumer_wait = (now.consumer_wait_ns - before.consumer_wait_ns) / dt;
  for (const Knob& k : knobs) {
    const NodeStatsSnapshot& a = before.nodes[k.node];
    const NodeStatsSnapshot& b = now.nodes[k.node];
    const double blocked = (b.output_wait_ns - a.output_wait_ns) / dt / std::max<int64_t>(1, k.value);
    if (k.kind == Knob::Kind::kParallelism) {
      const double node_busy = b.busy_ns - a.busy_ns;
      const double util = node_busy / dt / std::max<int64_t>(1, k.value);
      const double share = busy > 0 ? node_busy / busy : 0;
      out.pressure.push_back(2 * util * cpu_free - blocked - 0.5 * oversubscribed * (1 - cpu_free) * (1 - share));
    } else {
      // A deeper queue helps only a bursty producer: one that sometimes
      // waits for room while at other times the consumer waits for it. A
      // producer that never waits is simply too slow; a queue the consumer
      // never waits on may give depth back.
      const double producer_blocked = (b.output_wait_ns - a.output_wait_ns) / dt;
      if (consumer_wait > 0.02) {
        out.pressure.push_back(producer_blocked > 0.02 ? std::min(consumer_wait, producer_blocked) : 0);
      } else {
        out.pressure.push_back(-blocked / 4);
      }
    }
  }
  return out;
}

void AutotuneThread::Run() {
  PipelineStatsSnapshot before = stats_->Snapshot();
  while (!stop_.WaitForNotificationWithTimeout(absl::Nanoseconds(interval_ns_))) {
    PipelineStatsSnapshot now = stats_->Snapshot();
    const Interval interval = Measure(before, now);
    before = std::move(now);
    absl::MutexLock lock(&shared_->mu);
    Apply(shared_->tuner.Step(interval));
  }
}

}  // namespace sluice::exec
