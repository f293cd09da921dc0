// Where each split of one epoch of a distributed_epoch job is: waiting in
// the pool, in flight to a client through a worker, waiting to be re-run
// for a client whose stream broke, failed too often, or done (the client
// has every sample). A split whose stream broke goes back to the same
// client, which still holds the samples that arrived and drops them from
// the re-run: that is how every sample arrives exactly once even when
// workers die.
//
// A split in flight holds a lease, renewed while its worker reports
// progress on it; one not renewed (its stream broke and the client's report
// was lost, or it is stuck) is re-run. A split that broke `max_failures` times is handed out as
// FAILED: the worker ends the client's epoch with its error, or under
// on_corrupt "skip" skips it.
#ifndef SLUICE_SERVICE_EPOCH_SPLITS_H_
#define SLUICE_SERVICE_EPOCH_SPLITS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "service.pb.h"

namespace sluice::service {

// How long a split's lease lasts, and how often it may break.
struct SplitPolicy {
  absl::Duration lease = absl::Seconds(30);
  int max_failures = 3;
};

// Thread-compatible.
class EpochSplits {
 public:
  // A worker stream's request for its next split. A retried request (the
  // same stream and seq) gets the same answer: a lost reply orphans nothing.
  struct Ask {
    int64_t client = 0;
    int64_t worker = 0;
    uint64_t stream = 0;  // 0: not deduplicated
    int64_t seq = 0;
    absl::Time now = absl::Time();
  };

  // `order`: the split indices in hand-out order.
  explicit EpochSplits(std::vector<int64_t> order, SplitPolicy policy = {});

  // The next split for the asking stream's client: one re-queued for the
  // client first (FAILED when it failed too often), else the next in the
  // pool; WAIT while any split is in flight (it may come back, for this
  // client or, when its own client dies, for anyone), END when all arrived.
  GetSplitResponse Next(const Ask& ask);
  // Marks `split` as in flight to `client` (a journal replay).
  void Assign(int64_t split, int64_t client, int64_t worker);
  // Every sample of `split` reached `client` (or it was skipped).
  // Idempotent.
  void Complete(int64_t split, int64_t client = -1);
  // Whether `client` may report `split` finished: it holds it, or it is
  // finished already (a repeated report).
  bool MayComplete(int64_t split, int64_t client) const;
  // The stream carrying `split` to `client` broke: run it again for them,
  // counting a failure `why` (none when empty: a replayed assignment).
  void Abandon(int64_t split, int64_t client, const std::string& why = "its stream broke");
  // `worker`'s stream of `split` for `client` ended before the split's end
  // (the client dropped the stream, perhaps after the worker had taken this
  // next split): re-run it for the client now, counting no failure (the
  // client counts what it saw). Ignored unless it is in flight so (on
  // `stream`, when known: the split may run again there on a newer one).
  void Dropped(int64_t split, int64_t client, int64_t worker, uint64_t stream = 0);
  // `worker` sent all of `split` into its stream for `client`: what is left
  // is the client's to read and report, however slowly, so its lease no
  // longer runs. Ignored unless it is in flight so.
  void Sent(int64_t split, int64_t client, int64_t worker);
  // `client`'s stream `stream` (Ask::stream) ended early: the splits in
  // flight on it (sent whole into a stream the client no longer reads, or
  // still running) are re-run for the client now, counting a failure `why`
  // (none when empty: the client dropped the stream), and the stream's
  // worker, asking on, gets END: a write into a stream its client
  // cancelled can still succeed.
  void StreamEnded(uint64_t stream, int64_t client, const std::string& why = "its stream broke");
  // Splits in flight through `worker` are re-run for their clients; a
  // worker that left on its own (drained) counts no failure against them.
  void WorkerLost(int64_t worker, bool count_failure = true);
  // A client that left: its splits return to the pool for the others.
  void ClientLost(int64_t client);
  // The client stopped reading this epoch (it left its loop): what it held
  // goes to the pool, and it is handed nothing more here (a cancelled
  // stream's late ask gets END; a split abandoned by it goes to the pool),
  // until it resumes the epoch.
  void ClientLeft(int64_t client);
  // A split some samples of which a resumed client has: it runs from
  // `first_record` (its records before were done).
  struct Partial {
    int64_t split;
    int64_t first_record;
  };
  // `client` took over the progress a consumer saved in this epoch: what
  // the consumer's clients (`previous`: the one that saved the state, those
  // that resumed from it since, and `client` itself) hold or finished runs
  // again (the state supersedes it), except the `done` splits; the
  // `partial` ones run for `client` alone, which drops the samples it had.
  void Resume(int64_t client, const std::vector<int64_t>& previous, const std::vector<int64_t>& done,
              const std::vector<Partial>& partial);
  // `worker` is running `split` for `client` and has sent `batches` of it:
  // when that moved since its last report (or it is the first), or the
  // split waits for its client to take a batch, the lease runs from `now`.
  // A split stuck in a kernel renews nothing.
  void Renew(int64_t split, int64_t client, int64_t worker, int64_t batches, bool waits_for_client, absl::Time now);
  // A stream whose split's lease ran out: stuck (in a kernel that never
  // returns), it will not ask for another split, so its client drops it.
  struct ExpiredStream {
    int64_t split = 0;
    int64_t client = 0;
    int64_t worker = 0;
    uint64_t stream = 0;
  };
  // Splits whose lease ran out by `now` are re-run for their clients;
  // returns the streams they were running on.
  std::vector<ExpiredStream> ExpireLeases(absl::Time now);
  // Every lease in flight runs `by` longer (a stall of the dispatcher's own).
  void ExtendLeases(absl::Duration by);

  // The splits every sample of which arrived, by the client they reached
  // (-1: not recorded).
  std::map<int64_t, std::vector<int64_t>> CompletedByClient() const;
  // The splits in flight or waiting to re-run, each with its client.
  std::vector<std::pair<int64_t, int64_t>> Held() const;

  int64_t size() const { return static_cast<int64_t>(slots_.size()); }
  int64_t completed() const { return completed_; }
  bool done() const { return completed_ == size(); }

 private:
  enum class State { kPool, kInFlight, kRequeued, kDone };
  struct Slot {
    State state = State::kPool;
    int64_t client = -1;
    int64_t worker = -1;
    uint64_t stream = 0;  // the asking stream's (0: unknown)
    absl::Time lease_until = absl::InfiniteFuture();
    int64_t progress = -1;  // batches its worker last reported
    int failures = 0;
    std::string last_failure = {};
    // GetSplitResponse's, for a resumed client's partial split (a compacted
    // journal forgets it: the split runs whole, the client drops what it had).
    int64_t first_record = 0;
  };
  bool Valid(int64_t split) const { return split >= 0 && split < size(); }
  // Takes from `client` the splits it holds (and has finished, when
  // `finished_too`), for the caller to return to the pool.
  std::vector<int64_t> Release(int64_t client, bool finished_too);
  // Puts `splits` at the pool's front, in the epoch's order.
  void ReturnToPool(std::vector<int64_t> splits);
  // Removes `split` from wherever it waits (pool or a client's queue).
  void Unqueue(int64_t split);
  GetSplitResponse Hand(const Ask& ask);
  // Whether the asking client holds kFairShareMargin more splits in flight
  // than another client of the job that asked within kHungryWithin: a
  // consumer that joined a shared job late, or reads faster, gets the pool
  // while it has less. Splits of a few hundred small rows fit by dozens
  // into a stream's buffers, so the first consumer took nearly all of an
  // epoch before the second asked.
  bool AheadOfAHungryClient(const Ask& ask) const;
  void EnterFlight(Slot& slot, int64_t client);
  void LeaveFlight(Slot& slot);

  static constexpr int64_t kFairShareMargin = 4;
  static constexpr absl::Duration kHungryWithin = absl::Seconds(1);

  SplitPolicy policy_;
  std::vector<Slot> slots_;
  std::vector<int64_t> position_;  // by split: its place in the epoch's order
  std::deque<int64_t> pool_;
  std::map<int64_t, std::deque<int64_t>> requeued_;  // by client
  std::set<int64_t> left_;                           // clients that left (ClientLeft)
  std::map<int64_t, int64_t> in_flight_;             // by client: its splits in flight
  std::map<int64_t, absl::Time> last_ask_;           // by client: its streams' last ask
  int64_t completed_ = 0;
  struct Answered {
    int64_t seq;
    GetSplitResponse response;
  };
  std::map<uint64_t, Answered> last_answer_;  // by stream
  std::set<uint64_t> ended_streams_;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_EPOCH_SPLITS_H_
