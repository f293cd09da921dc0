#include "sluice/placement/placed_pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sluice/core/python_process.h"
#include "sluice/io/arrow_source.h"
#include "sluice/io/object_store.h"
#include "sluice/io/random_access_file.h"
#include "sluice/placement/pipeline_metrics.h"
#include "sluice/placement/variant.h"
#include "sluice/service/distributed_pipeline.h"

namespace sluice::placement {
namespace {

absl::StatusOr<std::shared_ptr<const exec::Pipeline>> Compile(const PipelineDef& def) {
  absl::StatusOr<std::unique_ptr<exec::Pipeline>> p = service::CreatePipeline(def);
  if (!p.ok()) return p.status();
  return std::shared_ptr<const exec::Pipeline>(*std::move(p));
}

int64_t ArrayBytesOf(const PipelineDef& def) {
  if (def.nodes_size() == 0 || !def.nodes(0).source().has_arrays()) return 0;
  int64_t bytes = 0;
  for (const ArrayColumn& c : def.nodes(0).source().arrays().columns()) bytes += static_cast<int64_t>(c.data().size());
  return bytes;
}

}  // namespace

absl::StatusOr<std::shared_ptr<PlacedPipeline>> PlacedPipeline::Create(const PipelineDef& def) {
  if (absl::Status s = CheckPlacementOption(def); !s.ok()) return s;
  const bool automatic = IsAuto(def);
  const Placement start = StartingPlacement(def, UsableCores());
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> first = Compile(automatic ? Variant(def, start) : def);
  if (!first.ok()) return first.status();
  Levers levers{false, false, false, false};
  int prefix_maps = 0;
  if (automatic) {
    levers = FreeLevers(def);
    prefix_maps = KeptPrefix::Maps(def, (*first)->compiled());
    levers.keep_prefix = prefix_maps > 0;
  }
  std::shared_ptr<PlacedPipeline> placed(
      new PlacedPipeline(def, automatic, start, levers, prefix_maps, *std::move(first)));
  placed->number_ = RegisterForMetrics(placed);
  return placed;
}

PlacedPipeline::PlacedPipeline(PipelineDef def, bool automatic, Placement start, Levers levers, int prefix_maps,
                               std::shared_ptr<const exec::Pipeline> first)
    : def_(std::move(def)),
      def_arrays_(ArrayBytesOf(def_)),
      automatic_(automatic),
      first_(first),
      kept_(prefix_maps > 0 ? std::make_unique<KeptPrefix>(def_, prefix_maps) : nullptr),
      policy_(start, levers),
      current_(first),
      current_placement_(start) {
  variants_.emplace_back(start, std::move(first));
}

std::shared_ptr<const exec::Pipeline> PlacedPipeline::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

absl::StatusOr<std::shared_ptr<const exec::Pipeline>> PlacedPipeline::VariantAt(const Placement& p) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [placement, pipeline] : variants_) {
      if (placement == p) return MakeCurrent(p, pipeline);
    }
  }
  const PipelineDef* written = &def_;
  if (p.keep_prefix) {
    if (kept_ == nullptr || kept_->state() != KeptPrefix::State::kReady) {
      return absl::FailedPreconditionError("the deterministic prefix is not kept (yet)");
    }
    written = &kept_->rewritten();
  }
  // Compiled outside the lock: a variant with workers starts their processes.
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> made = Compile(Variant(*written, p));
  absl::MutexLock lock(&mu_);
  if (!made.ok()) {
    policy_.Refuse(absl::StrCat(p.Describe(), " could not start: ", made.status().message()));
    return made.status();
  }
  variants_.emplace_back(p, *made);
  return MakeCurrent(p, *made);
}

std::shared_ptr<const exec::Pipeline> PlacedPipeline::MakeCurrent(const Placement& p,
                                                                  std::shared_ptr<const exec::Pipeline> pipeline) {
  // Only the first placement (the schema's) and the current one stay
  // compiled; worker processes stop with theirs once its iterators end.
  variants_.erase(std::remove_if(variants_.begin(), variants_.end(),
                                 [&](const auto& v) { return v.second != first_ && !(v.first == p); }),
                  variants_.end());
  current_ = std::move(pipeline);
  current_placement_ = p;
  TrimIdleLocked();
  return current_;
}

void PlacedPipeline::TrimIdle() {
  absl::MutexLock lock(&mu_);
  TrimIdleLocked();
}

void PlacedPipeline::TrimIdleLocked() {
  for (const auto& [placement, pipeline] : variants_) {
    if (pipeline != current_) pipeline->TrimCache();
  }
}

Placement PlacedPipeline::Observe(const Measurements& m) {
  absl::MutexLock lock(&mu_);
  last_ = m;
  // A window of a placement the policy has left (a move waiting for the
  // epoch's end) says nothing about the one it chose.
  if (m.placement != policy_.current()) return policy_.current();
  Decision d = policy_.Observe(m);
  if (!d.alternatives.empty()) alternatives_ = std::move(d.alternatives);
  return d.next;
}

void PlacedPipeline::LoseService(const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  policy_.LoseService(std::string(error.message()));
}

Placement PlacedPipeline::Runnable(Placement p) {
  if (!p.keep_prefix) return p;
  if (kept_ == nullptr) {
    p.keep_prefix = false;
    return p;
  }
  kept_->Start();
  const KeptPrefix::State state = kept_->state();
  absl::MutexLock lock(&mu_);
  if (state == KeptPrefix::State::kReady) {
    if (!std::exchange(prefix_noted_, true)) policy_.Note(kept_->summary());
    return p;
  }
  if (state == KeptPrefix::State::kFailed && policy_.levers().keep_prefix) policy_.Withdraw(kept_->summary());
  p.keep_prefix = false;
  return p;
}

int64_t PlacedPipeline::PrefixRowBytes() const { return kept_ == nullptr ? 0 : kept_->row_bytes(); }

int PlacedPipeline::PrefixMaps(const Placement& placement) const {
  // Its variants insert nodes after the prefix only.
  return kept_ == nullptr || placement.keep_prefix ? 0 : kept_->maps();
}

absl::Status PlacedPipeline::KeepPrefixNow() {
  if (kept_ == nullptr) {
    return absl::FailedPreconditionError(
        "no deterministic prefix to keep: the placement is not \"auto\", or no map on the CPU after a source that "
        "reads files is free of random draws and Python ops, writable and read back in the same order, or a "
        "distribute node runs the pipeline on a service's workers");
  }
  kept_->Start();
  kept_->Wait();
  if (kept_->state() != KeptPrefix::State::kReady) return absl::FailedPreconditionError(kept_->summary());
  return absl::OkStatus();
}

void PlacedPipeline::Bank(const WindowMeter& meter, const Placement& placement) {
  absl::MutexLock lock(&mu_);
  carried_ = meter;
  carried_placement_ = placement;
}

WindowMeter PlacedPipeline::Carried(const Placement& placement) {
  absl::MutexLock lock(&mu_);
  WindowMeter meter = std::exchange(carried_, WindowMeter());
  return carried_placement_ == placement ? meter : WindowMeter();
}

bool PlacedPipeline::MovesMidEpoch(const Placement& from, const Placement& to) const {
  // A thread count is not in the state; workers deliver unordered, and an
  // unordered state moves between them and this process.
  return (from.local_workers == to.local_workers && from.service_workers == to.service_workers) ||
         def_.options().unordered();
}

std::unique_ptr<PlacedIterator> PlacedPipeline::Iterate(uint64_t epoch) {
  Placement p;
  {
    absl::MutexLock lock(&mu_);
    p = policy_.current();
  }
  p = Runnable(p);
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> pipeline = VariantAt(p);
  if (!pipeline.ok()) {  // refused: the policy is back in this process, compiled already
    absl::MutexLock lock(&mu_);
    p = policy_.current();
    auto found = std::find_if(variants_.begin(), variants_.end(), [&](const auto& v) { return v.first == p; });
    if (found == variants_.end()) found = variants_.begin();
    p = found->first;
    pipeline = current_ = found->second;
  }
  std::unique_ptr<exec::PipelineIterator> inner = (*pipeline)->Iterate(epoch);
  return std::unique_ptr<PlacedIterator>(
      new PlacedIterator(shared_from_this(), *std::move(pipeline), std::move(inner), p, epoch));
}

absl::StatusOr<std::unique_ptr<PlacedIterator>> PlacedPipeline::Resume(const std::string& state) {
  Placement p;
  {
    absl::MutexLock lock(&mu_);
    p = policy_.current();
  }
  p = Runnable(p);
  // An ordered state restores in this process only (where the policy
  // moved the work; a distribute node written in the definition stays).
  if (!def_.options().unordered() && WrittenDistribute(def_) == nullptr) {
    p.local_workers = 0;
    p.service_workers = false;
  }
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> pipeline = VariantAt(p);
  if (!pipeline.ok()) return pipeline.status();
  absl::StatusOr<std::unique_ptr<exec::PipelineIterator>> inner = (*pipeline)->Resume(state);
  if (!inner.ok()) return inner.status();
  std::unique_ptr<PlacedIterator> it(
      new PlacedIterator(shared_from_this(), *std::move(pipeline), *std::move(inner), p, 0));
  it->whole_epoch_ = false;
  return it;
}

PlacedPipeline::Holdings PlacedPipeline::held() const {
  absl::MutexLock lock(&mu_);
  Holdings h;
  for (const auto& [placement, pipeline] : variants_) {
    const BufferPool::Stats s = pipeline->memory();
    h.pool.live_bytes += s.live_bytes;
    h.pool.cached_bytes += s.cached_bytes;
    h.pool.peak_live_bytes += s.peak_live_bytes;
    h.pool.peak_held_bytes += s.peak_held_bytes;
    h.rings += pipeline->ring_bytes();
    h.staging = std::max(h.staging, pipeline->staging_bytes());  // one pool per device runtime
  }
  return h;
}

PlacedPipeline::Memory PlacedPipeline::memory() const {
  const Holdings h = held();
  const graph::CompiledPipeline& c = first_->compiled();
  Memory m;
  m.budget = c.memory_budget_bytes;
  m.budget_default = c.memory_budget_default;
  m.in_use = h.pool.live_bytes;
  m.cached = h.pool.cached_bytes;
  m.rings = h.rings;
  m.staging = h.staging;
  m.object_blocks = io::ObjectBlockBytes();
  m.python_shared = PythonSharedBytes();
  m.mapped_files = io::MappedFileBytes();
  m.columnar = io::ColumnarBytes();
  m.arrays = io::HeldArrayBytes();
  const int64_t beside_pool =
      m.rings + m.staging + m.object_blocks + m.python_shared + m.mapped_files + m.columnar + m.arrays;
  m.held = m.in_use + m.cached + beside_pool;
  m.peak_in_use = h.pool.peak_live_bytes;
  int64_t peak = peak_held_.load(std::memory_order_relaxed);
  const int64_t now = std::max(static_cast<int64_t>(h.pool.peak_held_bytes) + beside_pool, m.held);
  while (now > peak && !peak_held_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  m.peak_held = std::max(peak, now);
  return m;
}

void PlacedPipeline::CountDelivery(int64_t rows, int64_t wait_ns) {
  samples_.fetch_add(rows, std::memory_order_relaxed);
  elements_.fetch_add(1, std::memory_order_relaxed);
  wait_ns_.fetch_add(wait_ns, std::memory_order_relaxed);
}

PlacedPipeline::Deliveries PlacedPipeline::delivered() const {
  return {samples_.load(std::memory_order_relaxed), elements_.load(std::memory_order_relaxed),
          wait_ns_.load(std::memory_order_relaxed)};
}

Report PlacedPipeline::report() const {
  absl::MutexLock lock(&mu_);
  Report r;
  r.pipeline = number_;
  r.automatic = automatic_;
  r.placement = policy_.current();
  r.running = current_placement_;
  r.judging = policy_.judging();
  r.levers = policy_.levers();
  r.decisions = policy_.log();
  if (kept_ != nullptr && kept_->state() != KeptPrefix::State::kIdle) {
    r.kept_prefix = kept_->state() == KeptPrefix::State::kWriting ? "being written" : kept_->summary();
  }
  r.last = last_;
  r.alternatives = alternatives_;
  return r;
}

PlacedIterator::PlacedIterator(std::shared_ptr<PlacedPipeline> owner, std::shared_ptr<const exec::Pipeline> pipeline,
                               std::unique_ptr<exec::PipelineIterator> inner, Placement placement, uint64_t epoch)
    : owner_(std::move(owner)),
      pipeline_(std::move(pipeline)),
      inner_(std::move(inner)),
      placement_(placement),
      epoch_(epoch) {
  if (!owner_->automatic()) return;
  meter_ = owner_->Carried(placement_);
  meter_.set_prefix(owner_->PrefixMaps(placement_), owner_->PrefixRowBytes());
  meter_.Start(*inner_);
}

PlacedIterator::~PlacedIterator() { Bank(); }

void PlacedIterator::Bank() {
  if (!owner_->automatic() || banked_) return;
  banked_ = true;
  meter_.Fold(*inner_);
  owner_->Bank(meter_, placement_);
}

absl::Status PlacedIterator::Next(Batch* out, bool* end) {
  if (out == nullptr || end == nullptr) return absl::InvalidArgumentError("Next: out and end must not be null");
  if (in_next_.exchange(true)) {
    return absl::FailedPreconditionError(
        "Next was called from two threads at once: an iterator takes one consumer at a time (give each thread an "
        "iterator of its own)");
  }
  absl::Status status = NextAlone(out, end);
  in_next_.store(false);
  return status;
}

absl::Status PlacedIterator::NextAlone(Batch* out, bool* end) {
  if (cancelled_.load()) return absl::CancelledError("the pipeline was cancelled");
  if (!owner_->automatic() && !PipelineMetricsServed()) return inner_->Next(out, end);
  const int64_t start = exec::NowNs();
  absl::Status status = inner_->Next(out, end);
  if (!status.ok() && FallBack(status)) status = inner_->Next(out, end);
  if (status.ok() && *end) {
    Bank();
    if (owner_->automatic() && whole_epoch_) owner_->EpochDelivered(rows_);
  }
  if (!status.ok() || *end) return status;
  const int64_t wait_ns = exec::NowNs() - start;
  owner_->CountDelivery(out->rows, wait_ns);
  if (!owner_->automatic()) return status;
  rows_ += out->rows;
  meter_.Count(out->rows, wait_ns);
  if (!meter_.Due()) return status;
  Measurements m = meter_.Take(*pipeline_, *inner_, placement_, owner_->epoch_rows_.load(std::memory_order_relaxed));
  m.epochs_repeat = epoch_ > 0;
  const Placement next = owner_->Runnable(owner_->Observe(m));
  if (next != placement_ && owner_->MovesMidEpoch(placement_, next)) MoveTo(next);
  return status;
}

bool PlacedIterator::MoveTo(const Placement& to) {
  absl::StatusOr<std::string> state = inner_->SaveState();
  if (!state.ok()) return false;
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> pipeline = owner_->VariantAt(to);
  if (!pipeline.ok()) return false;
  absl::StatusOr<std::unique_ptr<exec::PipelineIterator>> resumed = (*pipeline)->Resume(*state);
  if (!resumed.ok()) return false;
  skipped_before_ += inner_->skipped().skipped();
  if (inner_->skipped().skipped() > 0) absl::StrAppend(&skip_summary_before_, inner_->skipped().Summary(), "; ");
  peak_before_ = std::max(peak_before_, inner_->peak_buffered_bytes());
  Install(*std::move(pipeline), *std::move(resumed));
  owner_->TrimIdle();  // the old placement's blocks are back in its pool
  placement_ = to;
  meter_.set_prefix(owner_->PrefixMaps(placement_), owner_->PrefixRowBytes());
  meter_.Start(*inner_);
  return true;
}

bool PlacedIterator::FallBack(const absl::Status& error) {
  if (!placement_.service_workers || (!absl::IsUnavailable(error) && !absl::IsDeadlineExceeded(error))) return false;
  Placement here = placement_;
  here.service_workers = false;
  if (!owner_->MovesMidEpoch(placement_, here)) return false;
  owner_->LoseService(error);
  return MoveTo(here);
}

void PlacedIterator::Install(std::shared_ptr<const exec::Pipeline> pipeline,
                             std::unique_ptr<exec::PipelineIterator> inner) {
  std::shared_ptr<const exec::Pipeline> old_pipeline;
  std::unique_ptr<exec::PipelineIterator> old_inner;  // destroyed first: it runs on old_pipeline
  absl::MutexLock lock(&move_mu_);
  old_pipeline = std::exchange(pipeline_, std::move(pipeline));
  old_inner = std::exchange(inner_, std::move(inner));
  if (cancelled_.load()) inner_->Cancel();
}

void PlacedIterator::Cancel() {
  cancelled_.store(true);
  if (move_mu_.TryLock()) {
    inner_->Cancel();
    move_mu_.Unlock();
  }
}

int64_t PlacedIterator::skipped() const { return skipped_before_ + inner_->skipped().skipped(); }

std::string PlacedIterator::skip_summary() const { return skip_summary_before_ + inner_->skipped().Summary(); }

int64_t PlacedIterator::peak_buffered_bytes() const { return std::max(peak_before_, inner_->peak_buffered_bytes()); }

}  // namespace sluice::placement
