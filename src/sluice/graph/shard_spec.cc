#include "sluice/graph/shard_spec.h"

#include "absl/strings/str_cat.h"

namespace sluice::graph {

absl::Status ShardSpec::CheckRows(const std::string& node, int64_t rows) const {
  if (rows < num_shards) {  // none at all too: every rank would train no step, without a word
    return absl::InvalidArgumentError(absl::StrCat("node '", node, "': the epoch has ", rows, " rows for ", num_shards,
                                                   " shards: every shard needs one at least"));
  }
  if (rows < global_batch() && !pad && !keep_short) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node, "': the epoch's ", rows,
                                                   " rows make no global batch of ", global_batch(), " (", num_shards,
                                                   " shards of ", batch,
                                                   "), and uneven \"drop\" leaves them out: use uneven \"pad\" "
                                                   "or a smaller batch"));
  }
  return absl::OkStatus();
}

}  // namespace sluice::graph
