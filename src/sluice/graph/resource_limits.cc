#include "sluice/graph/resource_limits.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace sluice::graph {
namespace {

// a * b, saturating: a definition's counts may be anything.
int64_t Times(int64_t a, int64_t b) {
  int64_t out;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

int64_t FixedRowBytes(const Schema& schema) {
  int64_t bytes = 0;
  for (const ColumnSpec& c : schema.columns()) {
    if (c.ragged) continue;
    bytes = std::min(std::numeric_limits<int64_t>::max() / 2,
                     bytes + Times(c.shape.num_elements(), static_cast<int64_t>(DTypeSize(c.dtype))));
  }
  return bytes;
}

// `what` says what the node would hold, and how much.
absl::Status TooMuch(const CompiledNode& node, absl::string_view what, absl::string_view limit, int64_t cap) {
  return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (", NodeKindName(node.kind), "): ", what,
                                                 " is over the limit ", limit, " (", cap, ")"));
}

}  // namespace

absl::Status CheckResourceLimits(const CompiledPipeline& plan, const ResourceLimits& limits) {
  if (plan.threads > limits.max_threads) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.threads of ", plan.threads, " is over the limit max_threads (", limits.max_threads, ")"));
  }
  int64_t batch_rows = 1;
  for (const CompiledNode& node : plan.nodes) {
    if (node.kind == NodeKind::kBatch) batch_rows = node.count;
    const int64_t element = Times(batch_rows, FixedRowBytes(node.output_schema));
    if (element > limits.max_batch_bytes) {
      return TooMuch(node, absl::StrCat(node.batched ? "a batch of " : "a sample of ", element, " bytes"),
                     "max_batch_bytes", limits.max_batch_bytes);
    }
    if (node.parallelism > limits.max_threads) {
      return TooMuch(node, absl::StrCat("parallelism ", node.parallelism), "max_threads", limits.max_threads);
    }
    const bool buffers = node.kind == NodeKind::kShuffle || (node.kind == NodeKind::kPrefetch && !node.auto_depth);
    if (buffers && Times(node.count, element) > limits.max_buffer_bytes) {
      return TooMuch(node, absl::StrCat("a buffer of ", node.count, " elements of ", element, " bytes"),
                     "max_buffer_bytes", limits.max_buffer_bytes);
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::graph
