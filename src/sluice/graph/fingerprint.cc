#include "sluice/graph/fingerprint.h"

#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace sluice::graph {

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&out);
  }  // the stream writes its last bytes as it goes
  return bytes;
}

std::string Fingerprint(const PipelineDef& def) {
  const std::string bytes = DeterministicBytes(def);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 16));
}

namespace {

// The user's Python code by its identity: a python op's `identity` attr
// and a Python dataset's digest stay, the pickled bytes (which differ from
// process to process: a class defined in __main__, a set) and the
// temporary file holding them go.
void CountCodeByIdentity(NodeDef* node) {
  if (node->has_map()) {
    for (OpDef& op : *node->mutable_map()->mutable_ops()) op.mutable_attrs()->mutable_fields()->erase("pickled");
  }
  if (node->has_source() && node->source().has_python_dataset()) {
    PythonDatasetSource* d = node->mutable_source()->mutable_python_dataset();
    if (!d->digest().empty()) d->clear_dataset();
  }
}

}  // namespace

std::string DefinitionFingerprint(const PipelineDef& def) {
  PipelineDef same = def;
  for (NodeDef& node : *same.mutable_nodes()) CountCodeByIdentity(&node);
  return Fingerprint(same);
}

std::string OutputFingerprint(const PipelineDef& def) {
  if (def.options().has_materialized_from()) {
    PipelineDef rewritten = def;
    rewritten.mutable_options()->clear_materialized_from();
    const MaterializedFrom& from = def.options().materialized_from();
    const std::string own = OutputFingerprint(rewritten);
    return own == from.rewritten_fingerprint() ? from.output_fingerprint() : own;
  }
  PipelineDef output = def;
  output.clear_name();
  ExecOptions* options = output.mutable_options();
  options->clear_threads();
  options->clear_memory_budget_bytes();
  options->clear_no_stats();
  options->clear_no_autotune();
  options->clear_unordered();
  options->clear_placement();
  options->clear_placement_service();
  auto* nodes = output.mutable_nodes();
  nodes->erase(std::remove_if(nodes->begin(), nodes->end(), [](const NodeDef& n) { return n.has_distribute(); }),
               nodes->end());
  bool after_shard = false;
  for (NodeDef& node : *output.mutable_nodes()) {
    // A sharded pipeline's state restores on any number of shards: their
    // count, the index and the per-shard batch are the run's shape (the
    // global batch and the uneven mode the state keeps are checked on their
    // own, with an error naming both).
    if (node.has_shard()) {
      node.mutable_shard()->clear_num_shards();
      node.mutable_shard()->clear_index();
      node.mutable_shard()->clear_uneven();
      after_shard = true;
    }
    if (node.has_batch() && after_shard) node.mutable_batch()->clear_size();
    CountCodeByIdentity(&node);
    if (node.has_map()) node.mutable_map()->clear_parallelism();
    if (node.has_prefetch()) node.mutable_prefetch()->clear_buffer_size();
    if (node.has_source()) {
      node.mutable_source()->clear_parallel_reads();
      node.mutable_source()->clear_throttle_bytes_per_s();
      node.mutable_source()->clear_pinned();  // the service's resolution of the source's own glob
      if (node.source().has_python_dataset()) {
        node.mutable_source()->mutable_python_dataset()->clear_processes();
        node.mutable_source()->mutable_python_dataset()->clear_python();
      }
    }
  }
  return Fingerprint(output);
}

}  // namespace sluice::graph
