// Where each split of one epoch of a distributed_epoch job is: waiting in
// the pool, in flight to a client through a worker, waiting to be re-run
// for a client whose stream broke, or done (the client has every sample).
// A split whose stream broke goes back to the same client, which still
// holds the samples that arrived and drops them from the re-run: that is
// how every sample arrives exactly once even when workers die.
#ifndef SLUICE_SERVICE_EPOCH_SPLITS_H_
#define SLUICE_SERVICE_EPOCH_SPLITS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "service.pb.h"

namespace sluice::service {

// Thread-compatible.
class EpochSplits {
 public:
  // `order`: the split indices in hand-out order.
  explicit EpochSplits(std::vector<int64_t> order);

  // The next split `worker` should run for `client`: one re-queued for the
  // client first, else the next in the pool; WAIT while the client still
  // has splits in flight (one may come back), END when it has none.
  GetSplitResponse Next(int64_t client, int64_t worker);
  // Marks `split` as in flight to `client` (a journal replay).
  void Assign(int64_t split, int64_t client, int64_t worker);
  // Every sample of `split` reached `client`. Idempotent.
  void Complete(int64_t split);
  // The stream carrying `split` to `client` broke: run it again for them.
  void Abandon(int64_t split, int64_t client);
  // Splits in flight through `worker` are re-run for their clients.
  void WorkerLost(int64_t worker);
  // A client that left: its splits return to the pool for the others.
  void ClientLost(int64_t client);

  int64_t size() const { return static_cast<int64_t>(slots_.size()); }
  int64_t completed() const { return completed_; }
  bool done() const { return completed_ == size(); }

 private:
  enum class State { kPool, kInFlight, kRequeued, kDone };
  struct Slot {
    State state = State::kPool;
    int64_t client = -1;
    int64_t worker = -1;
  };
  bool Valid(int64_t split) const { return split >= 0 && split < size(); }
  // Removes `split` from wherever it waits (pool or a client's queue).
  void Unqueue(int64_t split);
  bool HasOpenSplits(int64_t client) const;

  std::vector<Slot> slots_;
  std::deque<int64_t> pool_;
  std::map<int64_t, std::deque<int64_t>> requeued_;  // by client
  int64_t completed_ = 0;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_EPOCH_SPLITS_H_
