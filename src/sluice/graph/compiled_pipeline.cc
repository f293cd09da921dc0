#include "sluice/graph/compiled_pipeline.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "sluice/core/rng.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/fusion.h"
#include "sluice/io/array_source.h"
#include "sluice/io/cifar_source.h"
#include "sluice/io/image_files.h"
#include "sluice/io/mnist_source.h"
#include "sluice/io/tfrecord_source.h"
#include "sluice/ops/parse_example.h"

namespace sluice::graph {
namespace {

constexpr int64_t kDefaultMemoryBudget = int64_t{1} << 30;

absl::string_view KindOf(const NodeDef& node) {
  switch (node.kind_case()) {
    case NodeDef::kSource: return "source";
    case NodeDef::kMap: return "map";
    case NodeDef::kFilter: return "filter";
    case NodeDef::kShuffle: return "shuffle";
    case NodeDef::kBatch: return "batch";
    case NodeDef::kPrefetch: return "prefetch";
    case NodeDef::kRepeat: return "repeat";
    case NodeDef::kTake: return "take";
    case NodeDef::kDistribute: return "distribute";
    case NodeDef::KIND_NOT_SET: break;
  }
  return "";
}

absl::Status NodeError(const std::string& where, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

// The declared features as parser specs and column shapes.
absl::Status ParseFeatures(const TfRecordSource& src, std::vector<io::FeatureSpec>* specs,
                           std::vector<Shape>* shapes) {
  for (int i = 0; i < src.features_size(); ++i) {
    const FeatureDef& f = src.features(i);
    const std::string where = absl::StrCat("features[", i, "] '", f.name(), "'");
    if (f.name().empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": name is empty"));
    for (const io::FeatureSpec& s : *specs) {
      if (s.name == f.name()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": declared twice"));
      }
    }
    io::FeatureSpec spec{f.name()};
    Shape shape{absl::MakeConstSpan(f.shape().data(), f.shape().size())};
    if (f.dtype() == "bytes") {
      if (f.length() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": length must be > 0, or 0 for values of any length"));
      }
      spec.kind = io::FeatureKind::kBytes;
      spec.count = f.length() > 0 ? f.length() : io::kAnyLength;
      shape = f.length() > 0 ? Shape{f.length()} : Shape{};
    } else if (f.dtype() == "int64" || f.dtype() == "float32") {
      spec.kind = f.dtype() == "int64" ? io::FeatureKind::kInt64 : io::FeatureKind::kFloat;
      for (int64_t d : shape.dims()) {
        if (d <= 0) return absl::InvalidArgumentError(absl::StrCat(where, ": shape must be positive"));
      }
      spec.count = shape.num_elements();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": dtype must be \"bytes\", \"int64\" or \"float32\", got \"", f.dtype(), "\""));
    }
    specs->push_back(spec);
    shapes->push_back(shape);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<io::ArrayColumnData>> ParseArrays(const ArraySource& def) {
  std::vector<io::ArrayColumnData> columns;
  for (const ArrayColumn& c : def.columns()) {
    const std::string where = absl::StrCat("arrays column '", c.name(), "'");
    io::ArrayColumnData col;
    col.spec.name = c.name();
    absl::StatusOr<DType> dtype = ParseDType(c.dtype());
    if (!dtype.ok()) return WithContext(dtype.status(), where);
    col.spec.dtype = *dtype;
    for (int64_t d : c.shape()) {
      if (d <= 0) return absl::InvalidArgumentError(absl::StrCat(where, ": shape must be positive"));
    }
    col.spec.shape = Shape(absl::MakeConstSpan(c.shape().data(), c.shape().size()));
    col.data = c.data();
    columns.push_back(std::move(col));
  }
  return columns;
}

absl::Status CompileSource(const SourceDef& def, CompiledNode* node,
                           std::vector<io::FeatureSpec>* features, std::vector<Shape>* shapes) {
  absl::StatusOr<std::unique_ptr<io::SourceFormat>> format;
  switch (def.format_case()) {
    case SourceDef::kTfrecord:
      SLUICE_RETURN_IF_ERROR(ParseFeatures(def.tfrecord(), features, shapes));
      format = io::MakeTfRecordSource(
          std::vector<std::string>(def.tfrecord().files().begin(), def.tfrecord().files().end()),
          def.split_records());
      break;
    case SourceDef::kMnist:
      format = io::MakeMnistSource(def.mnist().images(), def.mnist().labels(), def.split_records());
      break;
    case SourceDef::kCifar10:
      format = io::MakeCifar10Source(
          std::vector<std::string>(def.cifar10().files().begin(), def.cifar10().files().end()),
          def.split_records());
      break;
    case SourceDef::kArrays: {
      SLUICE_ASSIGN_OR_RETURN(std::vector<io::ArrayColumnData> columns, ParseArrays(def.arrays()));
      format = io::MakeArraySource(std::move(columns), def.split_records());
      break;
    }
    case SourceDef::kImageFolder:
      format = io::MakeImageFolderSource(def.image_folder().root());
      break;
    case SourceDef::kFileList:
      format = io::MakeFileListSource(def.file_list().path());
      break;
    case SourceDef::FORMAT_NOT_SET:
      return absl::InvalidArgumentError(
          "no format set (expected tfrecord, mnist, cifar10, arrays, image_folder or file_list)");
  }
  if (!format.ok()) return format.status();
  if (def.on_corrupt() != "" && def.on_corrupt() != "error" && def.on_corrupt() != "skip") {
    return absl::InvalidArgumentError(absl::StrCat(
        "on_corrupt must be \"error\" or \"skip\", got \"", def.on_corrupt(), "\""));
  }
  if (def.split_records() < 0) return absl::InvalidArgumentError("split_records must be >= 0");
  node->format = std::move(*format);
  node->output_schema = node->format->schema();
  node->shuffle_splits = def.shuffle_splits();
  node->skip_corrupt = def.on_corrupt() == "skip";
  if (def.throttle_bytes_per_s() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node->name, "': throttle_bytes_per_s must be >= 0, got ",
                                                   def.throttle_bytes_per_s()));
  }
  node->throttle_bytes_per_s = def.throttle_bytes_per_s();
  return absl::OkStatus();
}

// Applies a bound op's outputs and drops to `schema`.
void ApplyToSchema(const ops::OpBinding& b, Schema* schema) {
  for (const ColumnSpec& out : b.outputs) schema->Set(out);
  if (b.drops.empty()) return;
  std::vector<ColumnSpec> kept;
  for (const ColumnSpec& c : schema->columns()) {
    bool dropped = false;
    for (const std::string& d : b.drops) dropped |= c.name == d;
    if (!dropped) kept.push_back(c);
  }
  *schema = Schema(std::move(kept));
}

absl::StatusOr<BoundOp> BindOp(const OpDef& def, const std::string& node_name, int position,
                               const Schema& schema, const ops::OpRegistry& registry,
                               bool want_predicate) {
  const ops::OpSchema* op = registry.Find(def.op());
  if (op != nullptr && op->predicate != want_predicate) {
    return absl::InvalidArgumentError(
        want_predicate ? absl::StrCat("op '", def.op(), "' is not a predicate (try keep_if)")
                       : absl::StrCat("op '", def.op(), "' is a predicate; use it in a filter node"));
  }
  SLUICE_ASSIGN_OR_RETURN(ops::OpBinding binding, registry.Bind(def.op(), def.attrs(), schema));
  return BoundOp{def.op(), OpKey(node_name, position), std::move(binding)};
}

}  // namespace

absl::string_view NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kSource: return "source";
    case NodeKind::kMap: return "map";
    case NodeKind::kFilter: return "filter";
    case NodeKind::kShuffle: return "shuffle";
    case NodeKind::kBatch: return "batch";
    case NodeKind::kPrefetch: return "prefetch";
    case NodeKind::kRepeat: return "repeat";
    case NodeKind::kTake: return "take";
    case NodeKind::kRemote: return "distribute";
  }
  return "?";
}

absl::StatusOr<int> FindDistribute(const PipelineDef& def) {
  int found = -1;
  for (int i = 0; i < def.nodes_size(); ++i) {
    if (def.nodes(i).kind_case() != NodeDef::kDistribute) continue;
    if (found >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nodes[", i, "]: a pipeline may have one distribute node (another is nodes[", found, "])"));
    }
    if (i == 0) return absl::InvalidArgumentError("nodes[0]: the first node must be a source");
    found = i;
  }
  return found;
}

absl::StatusOr<CompiledPipeline> Compile(const PipelineDef& def, const ops::OpRegistry& registry,
                                         const CompileRange& range) {
  CompiledPipeline out;
  out.name = def.name();
  out.seed = def.seed();
  out.threads = def.options().threads() > 0
                    ? def.options().threads()
                    : std::max(1u, std::thread::hardware_concurrency());
  out.memory_budget_bytes = def.options().memory_budget_bytes() > 0
                                ? def.options().memory_budget_bytes()
                                : kDefaultMemoryBudget;
  out.ordered = !def.options().unordered();
  out.autotune = !def.options().no_autotune();
  out.stats = !def.options().no_stats() || out.autotune;
  if (def.nodes_size() == 0) return absl::InvalidArgumentError("pipeline has no nodes");
  const int end = range.end < 0 ? def.nodes_size() : std::min(range.end, def.nodes_size());
  if (range.begin < 0 || range.begin >= end) {
    return absl::InvalidArgumentError(absl::StrCat("no nodes in [", range.begin, ", ", end, ")"));
  }

  SLUICE_ASSIGN_OR_RETURN(const int distribute, FindDistribute(def));
  Schema schema = range.input;
  bool batched = range.input_batched;
  std::vector<io::FeatureSpec> features;
  std::vector<Shape> feature_shapes;
  std::optional<BoundOp> pending_parse;
  for (int i = range.begin; i < end; ++i) {
    const NodeDef& nd = def.nodes(i);
    const absl::string_view kind = KindOf(nd);
    // Default names skip the distribute node, so that adding one changes no
    // random key: the distributed pipeline draws as the local one does.
    const int position = distribute >= 0 && i > distribute ? i - 1 : i;
    const std::string name = nd.name().empty() ? absl::StrCat(kind, "_", position) : nd.name();
    const std::string where = absl::StrCat("node '", name, "' (nodes[", i, "])");
    if (kind.empty()) {
      return NodeError(absl::StrCat("nodes[", i, "]"),
                       "no kind set (expected source, map, filter, shuffle, batch, prefetch, "
                       "repeat, take or distribute)");
    }
    if ((i == 0) != (nd.kind_case() == NodeDef::kSource)) {
      return NodeError(where, i == 0 ? "the first node must be a source"
                                     : "only the first node may be a source");
    }
    if (i == range.begin && i > 0 && nd.kind_case() != NodeDef::kDistribute) {
      return NodeError(where, "a pipeline part that does not start at the source starts at the distribute node");
    }
    if (nd.kind_case() == NodeDef::kDistribute && i != range.begin) {
      return NodeError(where, "the nodes before a distribute node run on the service's workers: "
                              "create this pipeline through the service client");
    }
    CompiledNode node;
    node.name = name;
    node.input_schema = schema;
    switch (nd.kind_case()) {
      case NodeDef::kSource: {
        node.kind = NodeKind::kSource;
        absl::Status s = CompileSource(nd.source(), &node, &features, &feature_shapes);
        if (!s.ok()) return WithContext(s, where);
        break;
      }
      case NodeDef::kMap:
      case NodeDef::kFilter: {
        const bool filter = nd.kind_case() == NodeDef::kFilter;
        node.kind = filter ? NodeKind::kFilter : NodeKind::kMap;
        if (filter && batched) return NodeError(where, "filter after batch is not supported; filter samples before batching");
        std::vector<const OpDef*> defs;
        if (filter) {
          defs.push_back(&nd.filter().predicate());
        } else {
          for (const OpDef& op : nd.map().ops()) defs.push_back(&op);
          if (defs.empty()) return NodeError(where, "a map needs at least one op");
          node.parallelism = nd.map().parallelism();
          if (node.parallelism < 0) return NodeError(where, "parallelism must be >= 0");
        }
        Schema s = schema;
        if (pending_parse) {
          node.input_schema = out.nodes.back().output_schema;
          node.ops.push_back(*std::move(pending_parse));
          pending_parse.reset();
        }
        for (size_t j = 0; j < defs.size(); ++j) {
          absl::StatusOr<BoundOp> op = BindOp(*defs[j], name, static_cast<int>(j), s, registry, filter);
          if (!op.ok()) {
            return WithContext(op.status(), filter ? absl::StrCat(where, ": predicate")
                                                   : absl::StrCat(where, ": ops[", j, "]"));
          }
          if (!filter) ApplyToSchema(op->binding, &s);
          node.ops.push_back(*std::move(op));
        }
        if (!filter) schema = s;
        if (!filter && !def.options().no_fuse_warps()) FuseWarps(&node.ops);
        if (!filter && !def.options().no_fuse_decode()) FuseDecodeNormalize(&node.ops);
        node.output_schema = schema;
        break;
      }
      case NodeDef::kShuffle:
        node.kind = NodeKind::kShuffle;
        node.count = nd.shuffle().buffer_size();
        if (node.count <= 0) return NodeError(where, "buffer_size must be > 0");
        if (batched) return NodeError(where, "shuffle after batch is not supported; shuffle samples before batching");
        break;
      case NodeDef::kBatch:
        node.kind = NodeKind::kBatch;
        node.count = nd.batch().size();
        node.drop_remainder = nd.batch().drop_remainder();
        if (node.count <= 0) return NodeError(where, absl::StrCat("size must be > 0, got ", node.count));
        if (batched) return NodeError(where, "a pipeline may batch only once");
        for (const ColumnSpec& c : schema.columns()) {
          if (c.ragged) {
            return NodeError(where, absl::StrCat("column '", c.name,
                                                 "' has variable-length bytes and cannot be batched; decode it "
                                                 "first (decode_image, decode_random_resized_crop), or "
                                                 "declare the feature's length on the tfrecord source"));
          }
        }
        batched = true;
        break;
      case NodeDef::kPrefetch:
        node.kind = NodeKind::kPrefetch;
        node.count = nd.prefetch().buffer_size() > 0 ? nd.prefetch().buffer_size() : 2;
        node.auto_depth = nd.prefetch().buffer_size() <= 0;
        break;
      case NodeDef::kRepeat:
        node.kind = NodeKind::kRepeat;
        node.count = nd.repeat().count();
        break;
      case NodeDef::kTake:
        node.kind = NodeKind::kTake;
        node.count = nd.take().count();
        if (node.count < 0) return NodeError(where, "count must be >= 0");
        break;
      case NodeDef::kDistribute:
        node.kind = NodeKind::kRemote;
        break;
      case NodeDef::KIND_NOT_SET:
        break;
    }
    if (node.kind != NodeKind::kSource && node.kind != NodeKind::kMap) node.output_schema = schema;
    if (node.kind == NodeKind::kSource) schema = node.output_schema;
    node.batched = batched;
    out.nodes.push_back(std::move(node));

    // Features declared on a tfrecord source are parsed by the first op of
    // the next map (or a map of its own), so parsing runs in parallel rather
    // than in the serial reader.
    if (i == 0 && !features.empty()) {
      SLUICE_ASSIGN_OR_RETURN(ops::OpBinding b,
                              ops::BindParseExample(features, feature_shapes, schema));
      const bool next_is_map = end > 1 && def.nodes(1).kind_case() == NodeDef::kMap;
      const std::string map_name = next_is_map && !def.nodes(1).name().empty()
                                       ? def.nodes(1).name()
                                       : (next_is_map ? "map_1" : "parse_example");
      pending_parse = BoundOp{"parse_example", OpKey(map_name, -1), std::move(b)};
      ApplyToSchema(pending_parse->binding, &schema);
      if (!next_is_map) {
        CompiledNode parse;
        parse.kind = NodeKind::kMap;
        parse.name = map_name;
        parse.input_schema = out.nodes.back().output_schema;
        parse.output_schema = schema;
        parse.batched = false;
        parse.ops.push_back(*std::move(pending_parse));
        pending_parse.reset();
        out.nodes.push_back(std::move(parse));
      }
    }
  }
  return out;
}

}  // namespace sluice::graph
