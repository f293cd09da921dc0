#include "sluice/service/epoch_splits.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace sluice::service {

EpochSplits::EpochSplits(std::vector<int64_t> order, SplitPolicy policy)
    : policy_(policy), slots_(order.size()), position_(order.size()) {
  for (size_t i = 0; i < order.size(); ++i) position_[order[i]] = static_cast<int64_t>(i);
  pool_.assign(order.begin(), order.end());
}

void EpochSplits::ReturnToPool(std::vector<int64_t> splits) {
  for (int64_t s : splits) {
    LeaveFlight(slots_[s]);
    slots_[s].state = State::kPool;
    slots_[s].client = slots_[s].worker = -1;
    slots_[s].stream = 0;
    slots_[s].lease_until = absl::InfiniteFuture();
    slots_[s].first_record = 0;  // a partial split's start was its client's alone
  }
  std::sort(splits.begin(), splits.end(), [this](int64_t a, int64_t b) { return position_[a] < position_[b]; });
  pool_.insert(pool_.begin(), splits.begin(), splits.end());
}

GetSplitResponse EpochSplits::Next(const Ask& ask) {
  if (ended_streams_.count(ask.stream) > 0) {  // its client reads it no more, retries included
    GetSplitResponse end;
    end.set_state(GetSplitResponse::END);
    return end;
  }
  if (ask.stream != 0) {
    auto last = last_answer_.find(ask.stream);
    if (last != last_answer_.end() && last->second.seq == ask.seq) return last->second.response;
  }
  GetSplitResponse out = Hand(ask);
  // A WAIT hands nothing out: its retry must look again.
  if (ask.stream != 0 && out.state() != GetSplitResponse::WAIT) last_answer_[ask.stream] = Answered{ask.seq, out};
  return out;
}

bool EpochSplits::AheadOfAHungryClient(const Ask& ask) const {
  auto mine = in_flight_.find(ask.client);
  const int64_t held = mine == in_flight_.end() ? 0 : mine->second;
  if (held < kFairShareMargin) return false;
  for (const auto& [client, asked] : last_ask_) {
    if (client == ask.client || left_.count(client) > 0 || ask.now - asked > kHungryWithin) continue;
    auto theirs = in_flight_.find(client);
    if (held >= (theirs == in_flight_.end() ? 0 : theirs->second) + kFairShareMargin) return true;
  }
  return false;
}

GetSplitResponse EpochSplits::Hand(const Ask& ask) {
  GetSplitResponse out;
  if (left_.count(ask.client) > 0) {
    out.set_state(GetSplitResponse::END);
    return out;
  }
  last_ask_[ask.client] = ask.now;
  std::deque<int64_t>* source = nullptr;
  auto requeued = requeued_.find(ask.client);
  if (requeued != requeued_.end() && !requeued->second.empty()) {
    source = &requeued->second;
  } else if (!pool_.empty()) {
    source = &pool_;
  }
  if (source == nullptr || (source == &pool_ && AheadOfAHungryClient(ask))) {
    // Splits in flight to any client may come back (that client may die).
    out.set_state(done() ? GetSplitResponse::END : GetSplitResponse::WAIT);
    return out;
  }
  const int64_t split = source->front();
  source->pop_front();
  Slot& slot = slots_[split];
  EnterFlight(slot, ask.client);
  slot.worker = ask.worker;
  slot.stream = ask.stream;
  slot.lease_until = ask.now + policy_.lease;
  slot.progress = -1;
  out.set_split(split);
  out.set_first_record(slot.first_record);
  if (slot.failures >= policy_.max_failures) {
    out.set_state(GetSplitResponse::FAILED);
    out.set_error(absl::StrCat("split ", split, " failed ", slot.failures, slot.failures == 1 ? " time (" : " times (",
                               slot.last_failure, "): a sample in it may crash the pipeline"));
  } else {
    out.set_state(GetSplitResponse::SPLIT);
  }
  return out;
}

void EpochSplits::Assign(int64_t split, int64_t client, int64_t worker) {
  if (!Valid(split) || slots_[split].state == State::kDone) return;
  Unqueue(split);
  Slot& slot = slots_[split];
  LeaveFlight(slot);
  EnterFlight(slot, client);
  slot.worker = worker;
  slot.stream = 0;
  slot.lease_until = absl::InfiniteFuture();
}

void EpochSplits::Complete(int64_t split, int64_t client) {
  if (!Valid(split) || slots_[split].state == State::kDone) return;
  Unqueue(split);
  LeaveFlight(slots_[split]);
  slots_[split] = Slot{State::kDone, client};
  ++completed_;
}

bool EpochSplits::MayComplete(int64_t split, int64_t client) const {
  if (!Valid(split)) return false;
  const Slot& slot = slots_[split];
  return slot.state == State::kDone ||
         (slot.client == client && (slot.state == State::kInFlight || slot.state == State::kRequeued));
}

void EpochSplits::Abandon(int64_t split, int64_t client, const std::string& why) {
  if (!Valid(split) || slots_[split].state != State::kInFlight || slots_[split].client != client) return;
  if (left_.count(client) > 0) {
    ReturnToPool({split});
    return;
  }
  Slot& slot = slots_[split];
  LeaveFlight(slot);
  slot.state = State::kRequeued;
  slot.worker = -1;
  slot.stream = 0;
  if (!why.empty()) {
    ++slot.failures;
    slot.last_failure = why;
  }
  requeued_[client].push_back(split);
}

void EpochSplits::Dropped(int64_t split, int64_t client, int64_t worker, uint64_t stream) {
  if (!Valid(split) || slots_[split].worker != worker) return;
  if (stream != 0 && slots_[split].stream != stream) return;
  Abandon(split, client, /*why=*/"");
}

void EpochSplits::Sent(int64_t split, int64_t client, int64_t worker) {
  if (!Valid(split)) return;
  Slot& slot = slots_[split];
  if (slot.state == State::kInFlight && slot.client == client && slot.worker == worker) {
    slot.lease_until = absl::InfiniteFuture();
  }
}

void EpochSplits::StreamEnded(uint64_t stream, int64_t client, const std::string& why) {
  if (stream == 0) return;
  ended_streams_.insert(stream);
  last_answer_.erase(stream);
  for (int64_t s = 0; s < size(); ++s) {
    if (slots_[s].state == State::kInFlight && slots_[s].stream == stream) Abandon(s, client, why);
  }
}

void EpochSplits::WorkerLost(int64_t worker, bool count_failure) {
  for (int64_t s = 0; s < size(); ++s) {
    if (slots_[s].state == State::kInFlight && slots_[s].worker == worker) {
      Abandon(s, slots_[s].client, count_failure ? absl::StrCat("worker ", worker, " was lost while running it") : "");
    }
  }
}

void EpochSplits::ClientLost(int64_t client) {
  last_ask_.erase(client);
  ReturnToPool(Release(client, /*finished_too=*/false));
}

void EpochSplits::ClientLeft(int64_t client) {
  left_.insert(client);
  ClientLost(client);
}

std::vector<int64_t> EpochSplits::Release(int64_t client, bool finished_too) {
  requeued_.erase(client);
  std::vector<int64_t> released;
  for (int64_t s = 0; s < size(); ++s) {
    const Slot& slot = slots_[s];
    if (slot.client != client) continue;
    if (slot.state == State::kInFlight || slot.state == State::kRequeued) released.push_back(s);
    if (finished_too && slot.state == State::kDone) {
      released.push_back(s);
      --completed_;
      slots_[s] = Slot{};
    }
  }
  return released;
}

void EpochSplits::Resume(int64_t client, const std::vector<int64_t>& previous, const std::vector<int64_t>& done,
                         const std::vector<Partial>& partial) {
  left_.erase(client);
  std::vector<int64_t> reopened;
  for (int64_t c : std::set<int64_t>(previous.begin(), previous.end())) {  // each client once
    for (int64_t s : Release(c, /*finished_too=*/true)) reopened.push_back(s);
  }
  ReturnToPool(std::move(reopened));
  for (int64_t s : done) Complete(s, client);
  for (const Partial& p : partial) {
    // Another client's (when `previous` was dropped and its splits went to
    // others) stays theirs.
    if (!Valid(p.split) || slots_[p.split].state != State::kPool) continue;
    Unqueue(p.split);
    Slot& slot = slots_[p.split];
    slot.state = State::kRequeued;
    slot.client = client;
    slot.first_record = p.first_record;
    requeued_[client].push_back(p.split);
  }
}

void EpochSplits::Renew(int64_t split, int64_t client, int64_t worker, int64_t batches, bool waits_for_client,
                        absl::Time now) {
  if (!Valid(split)) return;
  Slot& slot = slots_[split];
  if (slot.state == State::kInFlight && slot.client == client && slot.worker == worker &&
      (batches != slot.progress || waits_for_client)) {
    slot.progress = batches;
    slot.lease_until = now + policy_.lease;
  }
}

std::vector<EpochSplits::ExpiredStream> EpochSplits::ExpireLeases(absl::Time now) {
  std::vector<ExpiredStream> expired;
  for (int64_t s = 0; s < size(); ++s) {
    const Slot& slot = slots_[s];
    if (slot.state == State::kInFlight && slot.lease_until < now) {
      expired.push_back({s, slot.client, slot.worker, slot.stream});
      Abandon(s, slot.client, absl::StrCat("it made no progress for ", absl::FormatDuration(policy_.lease)));
    }
  }
  return expired;
}

void EpochSplits::ExtendLeases(absl::Duration by) {
  for (Slot& slot : slots_) {
    if (slot.state == State::kInFlight) slot.lease_until += by;  // an infinite one stays so
  }
}

std::map<int64_t, std::vector<int64_t>> EpochSplits::CompletedByClient() const {
  std::map<int64_t, std::vector<int64_t>> out;
  for (int64_t s = 0; s < size(); ++s) {
    if (slots_[s].state == State::kDone) out[slots_[s].client].push_back(s);
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> EpochSplits::Held() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t s = 0; s < size(); ++s) {
    if (slots_[s].state == State::kInFlight || slots_[s].state == State::kRequeued) {
      out.emplace_back(s, slots_[s].client);
    }
  }
  return out;
}

void EpochSplits::EnterFlight(Slot& slot, int64_t client) {
  slot.state = State::kInFlight;
  slot.client = client;
  ++in_flight_[client];
}

void EpochSplits::LeaveFlight(Slot& slot) {
  if (slot.state != State::kInFlight) return;
  if (--in_flight_[slot.client] == 0) in_flight_.erase(slot.client);
}

void EpochSplits::Unqueue(int64_t split) {
  const Slot& slot = slots_[split];
  std::deque<int64_t>* queue = nullptr;
  if (slot.state == State::kPool) queue = &pool_;
  if (slot.state == State::kRequeued) queue = &requeued_[slot.client];
  if (queue != nullptr) queue->erase(std::remove(queue->begin(), queue->end(), split), queue->end());
}

}  // namespace sluice::service
