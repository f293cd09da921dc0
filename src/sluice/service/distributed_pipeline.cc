#include "sluice/service/distributed_pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/distributed_input.h"
#include "sluice/service/local_cluster.h"
#include "sluice/service/log.h"

namespace sluice::service {
namespace {

absl::StatusOr<ClientOptions> ToClientOptions(const DistributeDef& d) {
  ClientOptions options;
  options.dispatcher = d.dispatcher();
  if (d.mode().empty() || d.mode() == "distributed_epoch") {
    options.mode = DISTRIBUTED_EPOCH;
  } else if (d.mode() == "parallel_epochs") {
    options.mode = PARALLEL_EPOCHS;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("mode must be \"distributed_epoch\" or \"parallel_epochs\", got \"", d.mode(), "\""));
  }
  options.job_name = d.job_name();
  SLUICE_ASSIGN_OR_RETURN(options.compression, ParseCompression(d.compression()));
  if (d.max_outstanding() < 0) return absl::InvalidArgumentError("max_outstanding must be >= 0");
  options.max_outstanding = d.max_outstanding() > 0 ? d.max_outstanding() : 4;
  if (d.connect_timeout_s() < 0) return absl::InvalidArgumentError("connect_timeout_s must be >= 0");
  if (d.connect_timeout_s() > 0) options.connect_timeout = absl::Seconds(d.connect_timeout_s());
  if (d.dispatcher_timeout_s() < 0) return absl::InvalidArgumentError("dispatcher_timeout_s must be >= 0");
  if (d.dispatcher_timeout_s() > 0) options.dispatcher_timeout = absl::Seconds(d.dispatcher_timeout_s());
  if (d.shared_memory_mb() < -1 || d.shared_memory_mb() > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared_memory_mb must be -1 (off), 0 (64) or up to 65536, not ", d.shared_memory_mb()));
  }
  if (d.shared_memory_mb() != 0) {
    options.shared_memory_auto = false;
    options.shared_memory_bytes = static_cast<size_t>(std::max(d.shared_memory_mb(), 0)) << 20;
  }
  options.security.ca_file = d.tls_ca_file();
  options.security.cert_file = d.tls_cert_file();
  options.security.key_file = d.tls_key_file();
  if (!d.token_file().empty()) SLUICE_RETURN_IF_ERROR(options.security.ReadTokenFile(d.token_file()));
  return options;
}

// Workers run distributed_epoch splits one at a time: a repeat or take
// before the split point would act per split, not per epoch, and a batch
// that drops its remainder would drop each split's last rows (every row,
// where a split is one image of a folder).
absl::Status CheckWorkersPart(const PipelineDef& def, int index, ProcessingMode mode) {
  if (mode != DISTRIBUTED_EPOCH) return absl::OkStatus();
  if (def.nodes(0).source().python_dataset().generator()) {
    return absl::InvalidArgumentError(
        "nodes[0]: a generator's items (sluice.from_generator) are one split, not splittable among workers as "
        "distributed_epoch mode needs: use mode \"parallel_epochs\" (each worker runs all of it), or "
        "sluice.from_dataset for a map-style dataset");
  }
  for (int i = 0; i < index; ++i) {
    const NodeDef& n = def.nodes(i);
    if (n.kind_case() == NodeDef::kRepeat || n.kind_case() == NodeDef::kTake) {
      return absl::InvalidArgumentError(
          absl::StrCat("nodes[", i,
                       "]: in distributed_epoch mode repeat and take go after the distribute node "
                       "(workers run splits, not whole epochs)"));
    }
    if (n.has_batch() && n.batch().drop_remainder()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nodes[", i,
          "] (batch): in distributed_epoch mode a batch before the distribute node is cut from each split on "
          "its own, so drop_remainder would drop every split's last rows: put the batch after the distribute "
          "node (the client batches across splits), drop_remainder false, or mode \"parallel_epochs\""));
    }
    if (n.has_shuffle() && n.shuffle().buffer_size() > 1) {
      // Its samples and their draws stay the same: a warning, not a refusal.
      Log("client", absl::StrCat("nodes[", i,
                                 "] (shuffle): in distributed_epoch mode a shuffle before the distribute "
                                 "node shuffles within each split (a worker runs a split at a time), whatever its "
                                 "buffer_size: put it after the distribute node for a buffer across splits"));
    }
  }
  return absl::OkStatus();
}

// A shard before the distribute node: its part of each global batch is one
// stream, made in order by one worker, whose batches the consumer takes as
// they come.
absl::Status CheckShardedPart(const PipelineDef& def, int index, ProcessingMode mode) {
  int shard = -1, batch = -1;
  for (int i = 0; i < index; ++i) {
    if (def.nodes(i).has_shard()) shard = i;
    if (def.nodes(i).has_batch()) batch = i;
  }
  if (shard < 0) return absl::OkStatus();
  const std::string where = absl::StrCat("nodes[", shard, "] (shard)");
  if (mode != PARALLEL_EPOCHS) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": a shard's rows are one stream in the epoch's order, which one worker makes: the distribute node "
        "after it needs mode \"parallel_epochs\" (distributed_epoch hands splits to whoever asks)"));
  }
  if (batch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": with a shard before the distribute node, the batch goes before it too"));
  }
  for (int i = index + 1; i < def.nodes_size(); ++i) {
    if (!def.nodes(i).has_map() && !def.nodes(i).has_prefetch()) {
      return absl::InvalidArgumentError(absl::StrCat("nodes[", i, "]: after a distribute node that follows a shard ",
                                                     "come only maps and prefetches"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

PipelineDef WorkersPart(const PipelineDef& def, int index) {
  PipelineDef part = def;
  part.mutable_nodes()->DeleteSubrange(index, def.nodes_size() - index);
  return part;
}

absl::StatusOr<std::unique_ptr<exec::Pipeline>> CreatePipeline(const PipelineDef& given) {
  SLUICE_ASSIGN_OR_RETURN(const int index, graph::FindDistribute(given));
  if (index < 0) return exec::Pipeline::Create(given);
  // The workers run this process's shard, not the one their environment says.
  PipelineDef def = given;
  SLUICE_RETURN_IF_ERROR(graph::ResolveShards(&def));
  const std::string where = absl::StrCat("node 'distribute' (nodes[", index, "])");
  const DistributeDef& d = def.nodes(index).distribute();
  absl::StatusOr<ClientOptions> options = ToClientOptions(d);
  if (!options.ok()) return WithContext(options.status(), where);
  SLUICE_RETURN_IF_ERROR(CheckWorkersPart(def, index, options->mode));
  SLUICE_RETURN_IF_ERROR(CheckShardedPart(def, index, options->mode));
  std::shared_ptr<LocalCluster> cluster;
  if (options->dispatcher.empty()) {
    // The local workers have this process's ops and files: a part they
    // would refuse is refused here, naming the op or file, before any starts.
    SLUICE_RETURN_IF_ERROR(graph::Compile(WorkersPart(def, index)).status());
    const int threads = def.options().threads();
    SLUICE_ASSIGN_OR_RETURN(cluster, LocalCluster::Start(d.local_workers(), threads));
    options->dispatcher = cluster->dispatcher_address();
  }
  absl::StatusOr<std::shared_ptr<DistributedInput>> input =
      DistributedInput::Connect(*options, WorkersPart(def, index));
  if (!input.ok()) return WithContext(input.status(), where);
  if (cluster) (*input)->KeepAlive(cluster, [c = cluster.get()] { return c->failure(); });
  graph::CompileRange range{index, -1, (*input)->schema(), (*input)->element().batched()};
  range.fold_into_remote = true;  // EpochReader runs the kRemote node's ops as batches arrive
  return exec::Pipeline::Create(def, range, *std::move(input));
}

}  // namespace sluice::service
