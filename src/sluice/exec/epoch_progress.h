// Where an epoch stands, and what the nodes record that let the pipeline's
// iterator find it while they run ahead of delivery: each epoch's split
// order (drawn once, for the source and the iterator alike) and the seams
// between a repeat's epochs.
#ifndef SLUICE_EXEC_EPOCH_PROGRESS_H_
#define SLUICE_EXEC_EPOCH_PROGRESS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "sluice/exec/delivery_ledger.h"
#include "sluice/exec/shuffle_state.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/io/file_split.h"

namespace sluice::exec {

struct EpochPosition {
  uint64_t epoch = 0;
  // Inside a repeat: its epochs run to the end before this one.
  int64_t repeat = 0;
  // The next record to deliver is `record` (in its file's numbering) of
  // split `split` of the (repeat's) epoch's split order.
  int64_t split = 0;
  int64_t record = 0;
  int64_t elements = 0;  // delivered this epoch
  int64_t rows = 0;      // delivered this epoch
  // Set when the pipeline shuffles; then split and record name the oldest
  // row the buffer held.
  std::optional<ShufflePosition> shuffle;
  // Unordered mode: what is done (then split, record and shuffle are unset).
  std::optional<DoneRows> done;
  // A distributed pipeline: the service job its consumer read, and the
  // consumer's client id in it (whose progress a resumed consumer takes over).
  std::string remote_job;
  int64_t remote_client = 0;
  // A sharded pipeline (shard_log.h): the global batches done, every shard
  // having delivered its part of them; split, record and shuffle are where
  // the stream at the shard node stood after them.
  struct Sharded {
    int64_t global_batches = 0;
    int64_t global_batch_size = 0;
    int num_shards = 0;  // that saved it (for messages)
    bool pad = false;
  };
  std::optional<Sharded> shard;
};

// The rows a resumed source hands on, counted from its first: of the first
// `through`, those in `kept` (ascending); every row after them. A resumed
// shuffle's buffer needs only the rows it held, and the source passes over
// the others without reading them whole.
struct RowSelection {
  std::vector<int64_t> kept;
  int64_t through = 0;
};

// A repeat's epochs inside epoch `outer` are numbered outer * stride + i:
// distinct for every (outer, i) while i < stride.
constexpr uint64_t kRepeatEpochStride = uint64_t{1} << 20;
inline uint64_t RepeatEpoch(uint64_t outer, int64_t i) { return outer * kRepeatEpochStride + static_cast<uint64_t>(i); }

// The order in which a source named `source` that shuffles its `n` splits
// (shuffle_splits) reads them in epoch `epoch`: split indices, drawn by
// (seed, source, epoch). The service's dispatcher hands splits out in the
// same order, so a position means the same in-process and distributed.
std::vector<int64_t> ShuffledSplitOrder(int64_t n, uint64_t seed, const std::string& source, uint64_t epoch);

// The key of the order in which a shuffled source whose readers take
// records in any order reads them in `epoch` (io::SplitReader::PermuteRecords).
uint64_t RecordOrderKey(uint64_t seed, const std::string& source, uint64_t epoch);

// The order in which the source reads its splits in epoch `epoch`.
std::vector<io::Split> EpochSplitOrder(const graph::CompiledNode& source, uint64_t seed, uint64_t epoch);

// An epoch's split order, drawn once per epoch (a source's splits may list
// files that change). Keeps the last few epochs. Thread-safe.
class SplitOrders {
 public:
  using MakeFn = std::function<std::vector<io::Split>(uint64_t epoch)>;
  explicit SplitOrders(MakeFn make) : make_(std::move(make)) {}
  // EpochSplitOrder's. `source` must outlive this.
  SplitOrders(const graph::CompiledNode& source, uint64_t seed)
      : make_([&source, seed](uint64_t epoch) { return EpochSplitOrder(source, seed, epoch); }) {}
  std::shared_ptr<const std::vector<io::Split>> Get(uint64_t epoch);

 private:
  const MakeFn make_;
  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<const std::vector<io::Split>>> orders_ ABSL_GUARDED_BY(mu_);
};

// Where each of a repeat's epochs starts among the rows it hands out.
// Thread-safe.
class RepeatSeams {
 public:
  // Epoch `i` of the repeat starts after `rows_before` rows.
  void Add(int64_t rows_before, int64_t i);
  // The epoch that row `row` belongs to, forgetting the ones before it;
  // nullopt when none had started by then.
  std::optional<int64_t> Find(int64_t row);

 private:
  absl::Mutex mu_;
  std::deque<std::pair<int64_t, int64_t>> seams_ ABSL_GUARDED_BY(mu_);  // (rows_before, i)
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_EPOCH_PROGRESS_H_
