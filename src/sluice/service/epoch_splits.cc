#include "sluice/service/epoch_splits.h"

#include <algorithm>

namespace sluice::service {

EpochSplits::EpochSplits(std::vector<int64_t> order) : slots_(order.size()) {
  pool_.assign(order.begin(), order.end());
}

GetSplitResponse EpochSplits::Next(int64_t client, int64_t worker) {
  GetSplitResponse out;
  std::deque<int64_t>* source = nullptr;
  auto requeued = requeued_.find(client);
  if (requeued != requeued_.end() && !requeued->second.empty()) {
    source = &requeued->second;
  } else if (!pool_.empty()) {
    source = &pool_;
  }
  if (source == nullptr) {
    out.set_state(HasOpenSplits(client) ? GetSplitResponse::WAIT : GetSplitResponse::END);
    return out;
  }
  const int64_t split = source->front();
  source->pop_front();
  slots_[split] = Slot{State::kInFlight, client, worker};
  out.set_state(GetSplitResponse::SPLIT);
  out.set_split(split);
  return out;
}

void EpochSplits::Assign(int64_t split, int64_t client, int64_t worker) {
  if (!Valid(split) || slots_[split].state == State::kDone) return;
  Unqueue(split);
  slots_[split] = Slot{State::kInFlight, client, worker};
}

void EpochSplits::Complete(int64_t split) {
  if (!Valid(split) || slots_[split].state == State::kDone) return;
  Unqueue(split);
  slots_[split] = Slot{State::kDone, -1, -1};
  ++completed_;
}

void EpochSplits::Abandon(int64_t split, int64_t client) {
  if (!Valid(split) || slots_[split].state != State::kInFlight || slots_[split].client != client) return;
  slots_[split] = Slot{State::kRequeued, client, -1};
  requeued_[client].push_back(split);
}

void EpochSplits::WorkerLost(int64_t worker) {
  for (int64_t s = 0; s < size(); ++s) {
    if (slots_[s].state == State::kInFlight && slots_[s].worker == worker) Abandon(s, slots_[s].client);
  }
}

void EpochSplits::ClientLost(int64_t client) {
  requeued_.erase(client);
  for (int64_t s = 0; s < size(); ++s) {
    Slot& slot = slots_[s];
    if (slot.client == client && (slot.state == State::kInFlight || slot.state == State::kRequeued)) {
      slot = Slot{};
      pool_.push_front(s);
    }
  }
}

void EpochSplits::Unqueue(int64_t split) {
  const Slot& slot = slots_[split];
  std::deque<int64_t>* queue = nullptr;
  if (slot.state == State::kPool) queue = &pool_;
  if (slot.state == State::kRequeued) queue = &requeued_[slot.client];
  if (queue != nullptr) queue->erase(std::remove(queue->begin(), queue->end(), split), queue->end());
}

bool EpochSplits::HasOpenSplits(int64_t client) const {
  for (const Slot& slot : slots_) {
    if (slot.client == client && (slot.state == State::kInFlight || slot.state == State::kRequeued)) {
      return true;
    }
  }
  return false;
}

}  // namespace sluice::service
