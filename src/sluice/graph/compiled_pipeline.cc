#include "sluice/graph/compiled_pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "sluice/core/memory_default.h"
#include "sluice/core/python_pool.h"
#include "sluice/core/rng.h"
#include "sluice/core/status_macros.h"
#include "sluice/core/usable_cores.h"
#include "sluice/graph/fingerprint.h"
#include "sluice/graph/fold_receive.h"
#include "sluice/graph/fusion.h"
#include "sluice/graph/pin_files.h"
#include "sluice/io/array_source.h"
#include "sluice/io/arrow_source.h"
#include "sluice/io/cifar_source.h"
#include "sluice/io/file_split.h"
#include "sluice/io/image_files.h"
#include "sluice/io/mnist_source.h"
#include "sluice/io/object_cache.h"
#include "sluice/io/python_dataset_source.h"
#include "sluice/io/tfrecord_source.h"
#include "sluice/io/webdataset_source.h"
#include "sluice/ops/decode_params.h"
#include "sluice/ops/parse_example.h"

namespace sluice::graph {
namespace {

// Reader threads a source may have: each holds a split in memory.
constexpr int kMaxParallelReads = 64;

absl::string_view KindOf(const NodeDef& node) {
  switch (node.kind_case()) {
    case NodeDef::kSource:
      return "source";
    case NodeDef::kMap:
      return "map";
    case NodeDef::kFilter:
      return "filter";
    case NodeDef::kShuffle:
      return "shuffle";
    case NodeDef::kBatch:
      return "batch";
    case NodeDef::kPrefetch:
      return "prefetch";
    case NodeDef::kRepeat:
      return "repeat";
    case NodeDef::kTake:
      return "take";
    case NodeDef::kDistribute:
      return "distribute";
    case NodeDef::kShard:
      return "shard";
    case NodeDef::KIND_NOT_SET:
      break;
  }
  return "";
}

absl::Status NodeError(const std::string& where, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

// Default names skip the distribute node, so that adding one changes no
// random key: the distributed pipeline draws as the local one does.
std::string NodeName(const NodeDef& nd, int i, int distribute) {
  const int position = distribute >= 0 && i > distribute ? i - 1 : i;
  return nd.name().empty() ? absl::StrCat(KindOf(nd), "_", position) : nd.name();
}

// The profile, the autotuner and errors tell nodes apart by name alone.
absl::Status CheckNamesUnique(const PipelineDef& def, int distribute) {
  std::map<std::string, int> first;
  for (int i = 0; i < def.nodes_size(); ++i) {
    const std::string name = NodeName(def.nodes(i), i, distribute);
    const auto [it, added] = first.emplace(name, i);
    if (added) continue;
    return NodeError(absl::StrCat("node '", name, "' (nodes[", i, "])"),
                     absl::StrCat("nodes[", it->second,
                                  "] has the same name; node names must be unique (the profile, the autotuner and "
                                  "errors tell nodes apart by them)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> EnvInt(const char* name, int fallback, const std::string& where) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  int n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return NodeError(
        where, absl::StrCat("num_shards 0 takes the job's from $", name, ", which is \"", value, "\", not a number"));
  }
  return n;
}

// A job of several ranks whose launcher set $WORLD_SIZE but not $RANK
// (LOCAL_RANK is the rank on its node only) would read shard 0 on every
// rank.
absl::Status CheckRankIsSet(int num_shards, const std::string& where) {
  const char* rank = std::getenv("RANK");
  if (num_shards <= 1 || (rank != nullptr && *rank != '\0')) return absl::OkStatus();
  return NodeError(where, absl::StrCat("num_shards 0 takes the job's: $WORLD_SIZE is ", num_shards,
                                       " but $RANK is not set (torchrun sets both; LOCAL_RANK is the rank on its "
                                       "node only): set RANK, or give num_shards and index"));
}

// The declared features as parser specs and column shapes.
absl::Status ParseFeatures(const TfRecordSource& src, std::vector<io::FeatureSpec>* specs, std::vector<Shape>* shapes) {
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
        return absl::InvalidArgumentError(absl::StrCat(where, ": length must be > 0, or 0 for values of any length"));
      }
      if (f.shape_size() > 0) {
        return absl::InvalidArgumentError(absl::StrCat(where,
                                                       ": shape is for int64 and float32 features; a bytes "
                                                       "feature has one value, of `length` bytes (0: any length)"));
      }
      spec.kind = io::FeatureKind::kBytes;
      spec.count = f.length() > 0 ? f.length() : io::kAnyLength;
      shape = f.length() > 0 ? Shape{f.length()} : Shape{};
    } else if (f.dtype() == "int64" || f.dtype() == "float32") {
      spec.kind = f.dtype() == "int64" ? io::FeatureKind::kInt64 : io::FeatureKind::kFloat;
      if (f.length() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": length is for bytes features; an ", f.dtype(), " feature's values are its `shape`"));
      }
      for (int64_t d : shape.dims()) {
        if (d <= 0)
          return absl::InvalidArgumentError(absl::StrCat(where, ": shape must be positive, got ", shape.ToString()));
      }
      spec.count = shape.num_elements();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dtype must be \"bytes\", \"int64\" or \"float32\", got \"", f.dtype(), "\""));
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
      if (d <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": a sample's shape must be positive, got [", absl::StrJoin(c.shape(), ","), "]"));
      }
    }
    col.spec.shape = Shape(absl::MakeConstSpan(c.shape().data(), c.shape().size()));
    col.data = c.data();
    columns.push_back(std::move(col));
  }
  return columns;
}

// The source's file patterns, or its pinned files taken literally.
std::vector<std::string> Patterns(const SourceDef& def,
                                  const google::protobuf::RepeatedPtrField<std::string>& patterns) {
  if (!def.has_pinned()) return std::vector<std::string>(patterns.begin(), patterns.end());
  std::vector<std::string> literal;
  for (const std::string& f : def.pinned().files()) literal.push_back(io::GlobEscape(f));
  return literal;
}

absl::StatusOr<std::vector<io::WebDatasetField>> ParseWebDatasetFields(const WebDatasetSource& def) {
  std::vector<io::WebDatasetField> fields;
  for (const WebDatasetField& f : def.fields()) {
    if (f.dtype() != "" && f.dtype() != "bytes" && f.dtype() != "int64") {
      return absl::InvalidArgumentError(absl::StrCat("webdataset field '", f.name(), "': dtype must be \"bytes\" or ",
                                                     "\"int64\", got \"", f.dtype(), "\""));
    }
    if (f.length() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("webdataset field '", f.name(), "': length must be >= 0"));
    }
    fields.push_back(io::WebDatasetField{f.name(),
                                         std::vector<std::string>(f.extensions().begin(), f.extensions().end()),
                                         f.dtype() == "int64", f.length()});
  }
  return fields;
}

absl::StatusOr<std::unique_ptr<io::SourceFormat>> MakeColumnar(io::ColumnarFormat format, const SourceDef& def,
                                                               const ColumnarSource& c) {
  return io::MakeColumnarSource(format, Patterns(def, c.files()),
                                std::vector<std::string>(c.columns().begin(), c.columns().end()));
}

absl::StatusOr<std::unique_ptr<io::SourceFormat>> PinnedImages(const SourceDef& def) {
  return io::MakeImageFilesSource(
      io::LabeledFiles{std::vector<std::string>(def.pinned().files().begin(), def.pinned().files().end()),
                       std::vector<int64_t>(def.pinned().labels().begin(), def.pinned().labels().end())});
}

absl::StatusOr<io::PythonDatasetOptions> PythonDatasetFrom(const PythonDatasetSource& d, int64_t split_records) {
  io::PythonDatasetOptions o;
  o.dataset = d.dataset();
  o.name = d.name().empty() ? d.dataset() : d.name();
  o.length = d.length();
  for (const PythonColumn& c : d.columns()) {
    ColumnSpec spec;
    spec.name = c.name();
    if (c.dtype() == "bytes" || c.dtype() == "image") {
      spec.ragged = true;
      if (c.dtype() == "image") o.images.insert(c.name());
    } else {
      SLUICE_ASSIGN_OR_RETURN(spec.dtype, ParseDType(c.dtype()));
      spec.shape = Shape(absl::MakeConstSpan(c.shape().data(), c.shape().size()));
    }
    o.columns.push_back(std::move(spec));
  }
  o.generator = d.generator();
  if (d.processes() < 0 || d.processes() > kMostPythonProcesses) {
    return absl::InvalidArgumentError(absl::StrCat("python_dataset '", o.name,
                                                   "': processes must be from 0 (one per core) to ",
                                                   kMostPythonProcesses, ", got ", d.processes()));
  }
  o.processes = d.generator()       ? 1  // one iterator
                : d.processes() > 0 ? d.processes()
                                    : UsableCores();
  o.interpreter = PythonInterpreter(d.python());
  o.split_records = split_records;
  return o;
}

absl::Status CompileSource(const SourceDef& def, CompiledNode* node, std::vector<io::FeatureSpec>* features,
                           std::vector<Shape>* shapes) {
  if (def.has_object_cache()) {
    SLUICE_RETURN_IF_ERROR(io::ObjectCache::Configure(def.object_cache().dir(), def.object_cache().max_bytes()));
  }
  absl::StatusOr<std::unique_ptr<io::SourceFormat>> format;
  int default_reads = 1;  // splits read at once unless parallel_reads says
  switch (def.format_case()) {
    case SourceDef::kTfrecord:
      SLUICE_RETURN_IF_ERROR(ParseFeatures(def.tfrecord(), features, shapes));
      format = io::MakeTfRecordSource(Patterns(def, def.tfrecord().files()), def.split_records());
      break;
    case SourceDef::kMnist:
      format = io::MakeMnistSource(def.mnist().images(), def.mnist().labels(), def.split_records());
      break;
    case SourceDef::kCifar10:
      format = io::MakeCifar10Source(Patterns(def, def.cifar10().files()), def.split_records());
      break;
    case SourceDef::kArrays: {
      SLUICE_ASSIGN_OR_RETURN(std::vector<io::ArrayColumnData> columns, ParseArrays(def.arrays()));
      format = io::MakeArraySource(std::move(columns), def.split_records());
      break;
    }
    case SourceDef::kImageFolder:
      format = def.has_pinned() ? PinnedImages(def) : io::MakeImageFolderSource(def.image_folder().root());
      break;
    case SourceDef::kFileList:
      format = def.has_pinned() ? PinnedImages(def) : io::MakeFileListSource(def.file_list().path());
      break;
    case SourceDef::kWebdataset: {
      SLUICE_ASSIGN_OR_RETURN(std::vector<io::WebDatasetField> fields, ParseWebDatasetFields(def.webdataset()));
      format = io::MakeWebDatasetSource(Patterns(def, def.webdataset().files()), std::move(fields));
      break;
    }
    case SourceDef::kParquet:
      format = MakeColumnar(io::ColumnarFormat::kParquet, def, def.parquet());
      break;
    case SourceDef::kArrowIpc:
      format = MakeColumnar(io::ColumnarFormat::kArrowIpc, def, def.arrow_ipc());
      break;
    case SourceDef::kArrowMemory:
      format = MakeColumnar(io::ColumnarFormat::kMemory, def, def.arrow_memory());
      break;
    case SourceDef::kPythonDataset: {
      SLUICE_ASSIGN_OR_RETURN(io::PythonDatasetOptions options,
                              PythonDatasetFrom(def.python_dataset(), def.split_records()));
      // A split per process: one read at a time would leave the rest idle.
      default_reads = std::min(options.processes, kMaxParallelReads);
      format = io::MakePythonDatasetSource(std::move(options));
      break;
    }
    case SourceDef::FORMAT_NOT_SET:
      return absl::InvalidArgumentError(
          "no format set (expected tfrecord, mnist, cifar10, arrays, image_folder, file_list, webdataset, parquet, "
          "arrow_ipc, arrow_memory or python_dataset)");
  }
  if (!format.ok()) return format.status();
  if (def.on_corrupt() != "" && def.on_corrupt() != "error" && def.on_corrupt() != "skip") {
    return absl::InvalidArgumentError(
        absl::StrCat("on_corrupt must be \"error\" or \"skip\", got \"", def.on_corrupt(), "\""));
  }
  if (def.split_records() < 0) return absl::InvalidArgumentError("split_records must be >= 0");
  RecallPinnedVersions(def);  // after the format's own look at its files
  node->format = std::move(*format);
  node->output_schema = node->format->schema();
  node->shuffle_splits = def.shuffle_splits();
  node->skip_corrupt = def.on_corrupt() == "skip";
  if (def.throttle_bytes_per_s() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("throttle_bytes_per_s must be >= 0, got ", def.throttle_bytes_per_s()));
  }
  node->throttle_bytes_per_s = def.throttle_bytes_per_s();
  if (def.parallel_reads() < 0 || def.parallel_reads() > kMaxParallelReads) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel_reads must be in [0, ", kMaxParallelReads, "], got ", def.parallel_reads()));
  }
  node->parallel_reads = def.parallel_reads() > 0 ? def.parallel_reads() : default_reads;
  return absl::OkStatus();
}

// Applies an op's outputs and drops to `schema`.
void ApplyToSchema(const ops::InferredOp& op, Schema* schema) {
  for (const ColumnSpec& out : op.outputs) schema->Set(out);
  if (op.drops.empty()) return;
  std::vector<ColumnSpec> kept;
  for (const ColumnSpec& c : schema->columns()) {
    bool dropped = false;
    for (const std::string& d : op.drops) dropped |= c.name == d;
    if (!dropped) kept.push_back(c);
  }
  *schema = Schema(std::move(kept));
}

// The name an op's random draws are keyed by: a decode op draws as the op
// it fuses with the decoding (decode_random_resized_crop as
// random_resized_crop), so fusing by hand changes no crop.
std::string DrawsAs(absl::string_view op) { return std::string(absl::StripPrefix(op, "decode_")); }

// How to get a build that runs `backend`.
std::string HowToGet(ops::Backend backend) {
  return absl::StrCat("this build of sluice has no ", ops::BackendName(backend),
                      " backend: rebuild with -DSLUICE_WITH_CUDA=ON on a machine with the CUDA toolkit "
                      "(docs/cpp.md, \"Devices\")");
}

// Compiles the nodes of one definition in order, carrying the schema
// between them. Each step names the node it fails on.
class Compiler {
 public:
  Compiler(const PipelineDef& def, const ops::OpRegistry& registry, const CompileRange& range, int distribute,
           CompiledPipeline* out)
      : def_(def),
        registry_(registry),
        distribute_(distribute),
        out_(out),
        schema_(range.input),
        batched_(range.input_batched) {
    // Ops of the nodes compiled elsewhere (a service's workers) count by
    // whether their op can draw at all: their attrs are not inferred here.
    auto count = [&](const OpDef& op) {
      const ops::OpSchema* schema = registry_.Find(op.op());
      if (schema != nullptr && schema->random()) ++random_ops_before_[DrawsAs(op.op())];
    };
    for (int i = 0; i < range.begin && i < def_.nodes_size(); ++i) {
      const NodeDef& nd = def_.nodes(i);
      if (nd.kind_case() == NodeDef::kMap) {
        for (const OpDef& op : nd.map().ops()) count(op);
      } else if (nd.kind_case() == NodeDef::kFilter) {
        count(nd.filter().predicate());
      }
    }
  }

  absl::Status AddNode(int i, int end) {
    const NodeDef& nd = def_.nodes(i);
    const absl::string_view kind = KindOf(nd);
    const std::string name = NodeName(nd, i, distribute_);
    const std::string where = absl::StrCat("node '", name, "' (nodes[", i, "])");
    SLUICE_RETURN_IF_ERROR(CheckPlacement(nd, i, kind, where));
    CompiledNode node;
    node.name = name;
    node.input_schema = schema_;
    absl::Status s;
    switch (nd.kind_case()) {
      case NodeDef::kSource:
        node.kind = NodeKind::kSource;
        s = CompileSource(nd.source(), &node, &features_, &feature_shapes_);
        if (s.ok()) schema_ = node.output_schema;
        break;
      case NodeDef::kMap:
        s = CompileMap(nd.map(), where, &node);
        break;
      case NodeDef::kFilter:
        s = CompileFilter(nd.filter(), where, &node);
        break;
      case NodeDef::kShard:
        s = CompileShard(nd.shard(), i, where, &node);
        break;
      default:
        s = CompileStructural(nd, where, &node);
        break;
    }
    if (!s.ok()) return nd.kind_case() == NodeDef::kSource ? WithContext(s, where) : s;
    if (node.kind != NodeKind::kSource && node.kind != NodeKind::kMap && node.kind != NodeKind::kShard) {
      node.output_schema = schema_;
    }
    node.batched = batched_;
    out_->nodes.push_back(std::move(node));
    if (i == 0 && !features_.empty()) return AddParseStep(end);
    return absl::OkStatus();
  }

 private:
  absl::Status CheckPlacement(const NodeDef& nd, int i, absl::string_view kind, const std::string& where) const {
    if (kind.empty()) {
      return NodeError(absl::StrCat("nodes[", i, "]"),
                       "no kind set (expected source, map, filter, shuffle, batch, prefetch, "
                       "repeat, take, distribute or shard)");
    }
    if ((i == 0) != (nd.kind_case() == NodeDef::kSource)) {
      return NodeError(where, i == 0 ? "the first node must be a source" : "only the first node may be a source");
    }
    const bool first = out_->nodes.empty();
    if (first && i > 0 && nd.kind_case() != NodeDef::kDistribute) {
      return NodeError(where, "a pipeline part that does not start at the source starts at the distribute node");
    }
    if (nd.kind_case() == NodeDef::kDistribute && !first) {
      return NodeError(where,
                       "the nodes before a distribute node run on the service's workers: "
                       "create this pipeline through the service client");
    }
    return absl::OkStatus();
  }

  // Infers op `def` against `schema` (kind-checked: predicates only in filters).
  absl::StatusOr<BoundOp> InferOp(const OpDef& def, const Schema& schema, bool want_predicate) {
    const ops::OpSchema* op = registry_.Find(def.op());
    if (op != nullptr && op->predicate() != want_predicate) {
      return absl::InvalidArgumentError(
          want_predicate ? absl::StrCat("op '", def.op(), "' is not a predicate (try keep_if)")
                         : absl::StrCat("op '", def.op(), "' is a predicate; use it in a filter node"));
    }
    if (op != nullptr && op->level() == ops::OpLevel::kBatch && !batched_) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", def.op(), "' works on whole batches: put it in a map after the batch node"));
    }
    SLUICE_ASSIGN_OR_RETURN(ops::InferredOp inferred, registry_.Infer(def.op(), def.attrs(), schema));
    const std::string drawn_as = DrawsAs(def.op());
    int& before = random_ops_before_[drawn_as];
    const uint64_t key = OpKey(drawn_as, before);
    if (inferred.random) ++before;
    return BoundOp{def.op(),       def.op(),          key, std::move(inferred), op->view(), op->level(), nullptr,
                   op->in_place(), op->whole_ranges()};
  }

  absl::Status CompileMap(const MapDef& map, const std::string& where, CompiledNode* node) {
    node->kind = NodeKind::kMap;
    if (map.ops().empty()) return NodeError(where, "a map needs at least one op");
    node->parallelism = map.parallelism();
    if (node->parallelism < 0 || node->parallelism > kMaxThreads) {
      return NodeError(where, absl::StrCat("parallelism must be in [0, ", kMaxThreads,
                                           "] (0: autotuned, from the pipeline's threads), got ", node->parallelism));
    }
    absl::StatusOr<ops::Backend> backend = ops::ParseBackend(map.device());
    if (!backend.ok()) return WithContext(backend.status(), where);
    node->backend = *backend;
    TakePendingParse(node);
    for (int j = 0; j < map.ops_size(); ++j) {
      absl::StatusOr<BoundOp> op = InferOp(map.ops(j), schema_, false);
      if (!op.ok()) return WithContext(op.status(), absl::StrCat(where, ": ops[", j, "]"));
      ApplyToSchema(op->inferred, &schema_);
      node->ops.push_back(*std::move(op));
    }
    const FusionOptions fusion{registry_, node->backend};
    if (!def_.options().no_fuse_warps()) {
      FuseWarps(fusion, &node->ops);
      FuseRescaleIntoWarp(fusion, &node->ops);
      FuseLayout(fusion, &node->ops);
    }
    if (!def_.options().no_fuse_decode()) FuseDecodeNormalize(fusion, &node->ops);
    SLUICE_RETURN_IF_ERROR(CheckBackend(*node, where));
    node->output_schema = schema_;
    return absl::OkStatus();
  }

  // Every op of a map has a kernel for its backend, or the error says why
  // not and what would help.
  absl::Status CheckBackend(const CompiledNode& node, const std::string& where) const {
    if (node.backend != ops::Backend::kCpu && registry_.runtime(node.backend) == nullptr) {
      return NodeError(where, absl::StrCat("device \"", ops::BackendName(node.backend), "\" (op '",
                                           node.ops.front().name, "'): ", HowToGet(node.backend)));
    }
    for (const BoundOp& op : node.ops) {
      if (registry_.Runs(op.op, node.backend)) continue;
      std::vector<std::string> backends;
      for (ops::Backend b : registry_.Backends(op.op)) backends.emplace_back(ops::BackendName(b));
      // The decode ops' cuda kernels need nvJPEG when sluice is built.
      const char* hint = node.backend == ops::Backend::kCuda && ops::IsDecodeOp(op.op)
                             ? " (builds with nvJPEG decode on cuda: docs/gpu.md)"
                             : "";
      if (backends.empty()) {  // a plugin's op registered without a kernel
        return NodeError(where, absl::StrCat("op '", op.name,
                                             "' has no kernel on any backend (was it registered "
                                             "with one?)"));
      }
      return NodeError(where, absl::StrCat("op '", op.name, "' has no ", ops::BackendName(node.backend),
                                           " kernel (it runs on: ", absl::StrJoin(backends, ", "),
                                           "); run it in a map of its own on one of those", hint));
    }
    return absl::OkStatus();
  }

  absl::Status CompileFilter(const FilterDef& filter, const std::string& where, CompiledNode* node) {
    node->kind = NodeKind::kFilter;
    if (batched_) return NodeError(where, "filter after batch is not supported; filter samples before batching");
    TakePendingParse(node);
    absl::StatusOr<BoundOp> op = InferOp(filter.predicate(), schema_, true);
    if (!op.ok()) return WithContext(op.status(), absl::StrCat(where, ": predicate"));
    node->ops.push_back(*std::move(op));
    return CheckBackend(*node, where);
  }

  // shuffle, batch, prefetch, repeat, take, distribute: no ops, and the
  // schema passes through.
  absl::Status CompileStructural(const NodeDef& nd, const std::string& where, CompiledNode* node) {
    switch (nd.kind_case()) {
      case NodeDef::kShuffle:
        node->kind = NodeKind::kShuffle;
        node->count = nd.shuffle().buffer_size();
        if (node->count <= 0) return NodeError(where, "buffer_size must be > 0");
        if (batched_) return NodeError(where, "shuffle after batch is not supported; shuffle samples before batching");
        return absl::OkStatus();
      case NodeDef::kBatch:
        return CompileBatch(nd.batch(), where, node);
      case NodeDef::kPrefetch:
        if (nd.prefetch().buffer_size() < 0) {
          return NodeError(where, absl::StrCat("buffer_size must be >= 0 (0: the autotuner's depth), got ",
                                               nd.prefetch().buffer_size()));
        }
        node->kind = NodeKind::kPrefetch;
        node->count = nd.prefetch().buffer_size() > 0 ? nd.prefetch().buffer_size() : 2;
        node->auto_depth = nd.prefetch().buffer_size() <= 0;
        return absl::OkStatus();
      case NodeDef::kRepeat:
        node->kind = NodeKind::kRepeat;
        node->count = nd.repeat().count();
        return absl::OkStatus();
      case NodeDef::kTake:
        node->kind = NodeKind::kTake;
        node->count = nd.take().count();
        if (node->count < 0) return NodeError(where, "count must be >= 0");
        return absl::OkStatus();
      case NodeDef::kDistribute:
        node->kind = NodeKind::kRemote;
        return absl::OkStatus();
      default:
        return absl::InternalError(absl::StrCat(where, ": not a structural node"));
    }
  }

  absl::Status CompileShard(const ShardDef& shard, int i, const std::string& where, CompiledNode* node) {
    node->kind = NodeKind::kShard;
    SLUICE_ASSIGN_OR_RETURN(node->shard, ShardSpecOf(shard, where));
    SLUICE_ASSIGN_OR_RETURN(node->shard.batch, ShardBatch(i, where));
    node->shard.keep_short = node->shard.num_shards == 1 && !node->shard.pad && !BatchDropsRemainder(i);
    // Rows a map after it will parse pass as the source made them.
    const Schema data = pending_parse_ ? out_->nodes.back().output_schema : schema_;
    node->input_schema = node->output_schema = data;
    if (node->shard.pad) {
      const ColumnSpec padding{"is_padding", DType::kUInt8, Shape{}};
      if (schema_.Find(padding.name))
        return NodeError(where, "uneven \"pad\" adds a column \"is_padding\", which exists");
      node->output_schema.Set(padding);
      schema_.Set(padding);
    }
    return absl::OkStatus();
  }

  bool BatchDropsRemainder(int shard) const {
    for (int j = shard + 1; j < def_.nodes_size(); ++j) {
      if (def_.nodes(j).has_batch()) return def_.nodes(j).batch().drop_remainder();
    }
    return false;
  }

  // The per-shard batch: the batch node's after the shard, where only
  // nodes that keep every row in order lie between (1 without a batch);
  // and nothing before the shard but what keeps the epoch's stream one
  // function of the seed and epoch. Checked on the whole definition (a
  // service's workers compile the part before a distribute node).
  absl::StatusOr<int64_t> ShardBatch(int i, const std::string& where) const {
    for (int j = 1; j < i; ++j) {
      const NodeDef::KindCase k = def_.nodes(j).kind_case();
      if (k != NodeDef::kMap && k != NodeDef::kFilter && k != NodeDef::kShuffle && k != NodeDef::kPrefetch) {
        return NodeError(where, absl::StrCat("a shard follows the source, maps, filters, a shuffle and prefetches; "
                                             "not a ",
                                             KindOf(def_.nodes(j)), " (nodes[", j, "])"));
      }
    }
    if (def_.options().unordered()) {
      return NodeError(where, "a shard takes its rows by their place in the epoch: options unordered cannot have one");
    }
    int64_t batch = 1;  // a pipeline batches once (CompileBatch)
    for (int j = i + 1; j < def_.nodes_size(); ++j) {
      const NodeDef& nd = def_.nodes(j);
      const NodeDef::KindCase k = nd.kind_case();
      if (k == NodeDef::kBatch) {
        batch = nd.batch().size();
      } else if (k != NodeDef::kMap && k != NodeDef::kPrefetch && k != NodeDef::kDistribute) {
        return NodeError(where, absl::StrCat("after a shard come maps, prefetches, one batch and a distribute node; "
                                             "not a ",
                                             KindOf(nd), " (nodes[", j,
                                             "]): every shard must yield the "
                                             "same number of batches"));
      }
    }
    return std::max<int64_t>(batch, 1);
  }

  absl::Status CompileBatch(const BatchDef& batch, const std::string& where, CompiledNode* node) {
    node->kind = NodeKind::kBatch;
    node->count = batch.size();
    node->drop_remainder = batch.drop_remainder();
    // One shard has no other rank to keep in step: its batches regroup.
    node->per_shard_element = std::any_of(out_->nodes.begin(), out_->nodes.end(), [](const CompiledNode& n) {
      return n.kind == NodeKind::kShard && n.shard.num_shards > 1;
    });
    if (node->count <= 0) return NodeError(where, absl::StrCat("size must be > 0, got ", node->count));
    if (batched_) return NodeError(where, "a pipeline may batch only once");
    batched_ = true;
    return absl::OkStatus();
  }

  // Features declared on a tfrecord source are parsed by the first op of
  // the next map or filter (or a map of its own), so parsing runs in
  // parallel rather than in the serial reader.
  absl::Status AddParseStep(int end) {
    SLUICE_ASSIGN_OR_RETURN(ops::InferredOp parse, ops::InferParseExample(features_, feature_shapes_, schema_));
    // Parsing runs on the cpu: only a cpu map takes it in; past a shard
    // right after the source, so that each shard parses its own rows only.
    const int next = end > 2 && def_.nodes(1).kind_case() == NodeDef::kShard ? 2 : 1;
    const bool next_is_map = end > next && def_.nodes(next).kind_case() == NodeDef::kMap &&
                             (def_.nodes(next).map().device().empty() || def_.nodes(next).map().device() == "cpu");
    const std::string map_name = next_is_map && !def_.nodes(next).name().empty()
                                     ? def_.nodes(next).name()
                                     : (next_is_map ? absl::StrCat("map_", next) : ops::kParseExampleOp);
    pending_parse_ = BoundOp{ops::kParseExampleOp,
                             ops::kParseExampleOp,
                             OpKey(map_name, -1),
                             std::move(parse),
                             false,
                             ops::OpLevel::kSample,
                             nullptr};
    ApplyToSchema(pending_parse_->inferred, &schema_);
    if (next_is_map) return absl::OkStatus();
    CompiledNode node;
    node.kind = NodeKind::kMap;
    node.name = map_name;
    node.input_schema = out_->nodes.back().output_schema;
    node.output_schema = schema_;
    TakePendingParse(&node);
    out_->nodes.push_back(std::move(node));
    return absl::OkStatus();
  }

  void TakePendingParse(CompiledNode* node) {
    if (!pending_parse_) return;
    node->input_schema = out_->nodes.back().output_schema;
    node->ops.push_back(*std::move(pending_parse_));
    pending_parse_.reset();
  }

  const PipelineDef& def_;
  const ops::OpRegistry& registry_;
  const int distribute_;
  CompiledPipeline* const out_;
  Schema schema_;
  bool batched_;
  std::vector<io::FeatureSpec> features_;
  std::vector<Shape> feature_shapes_;
  std::optional<BoundOp> pending_parse_;
  // An op draws by its name and the number of random ops of that name
  // before it, not by its node: regrouping ops into other maps, or moving
  // them across the batch (to decode on the GPU after it), keeps every
  // draw, and deterministic ops (a materialized prefix) shift none.
  std::map<std::string, int> random_ops_before_;
};

// InvalidArgument naming an option whose number no pipeline can take (0
// leaves threads and the budget to the machine).
absl::Status CheckNumericOptions(const ExecOptions& options) {
  if (options.threads() < 0 || options.threads() > kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrCat("options.threads must be in [0, ", kMaxThreads,
                                                   "] (0: one per usable core), got ", options.threads()));
  }
  if (options.memory_budget_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.memory_budget_bytes must be >= 0 (0: sized to the machine), got ", options.memory_budget_bytes()));
  }
  return absl::OkStatus();
}

// The pipeline-wide settings of `def`, before any node.
CompiledPipeline CompileOptions(const PipelineDef& def, const ops::OpRegistry& registry) {
  CompiledPipeline out;
  out.registry = &registry;
  out.name = def.name();
  out.seed = def.seed();
  out.threads = def.options().threads() > 0 ? def.options().threads() : std::min(UsableCores(), kMaxThreads);
  out.memory_budget_bytes = def.options().memory_budget_bytes();
  if (out.memory_budget_bytes <= 0) {
    const DefaultMemoryBudget budget = DefaultMemoryBudgetOfMachine();
    out.memory_budget_bytes = budget.bytes;
    out.memory_budget_default = budget.Describe();
  }
  out.ordered = !def.options().unordered();
  out.autotune = !def.options().no_autotune();
  out.stats = !def.options().no_stats() || out.autotune;
  return out;
}

// A source whose rows go to a shard of more than one with nothing but
// prefetches between learns the shard's spec: its readers may leave the
// rows of other shards unmade.
void MarkRowsKeptByShard(CompiledPipeline* out) {
  if (out->nodes.empty() || out->nodes[0].kind != NodeKind::kSource) return;
  for (size_t i = 1; i < out->nodes.size(); ++i) {
    const CompiledNode& node = out->nodes[i];
    if (node.kind == NodeKind::kPrefetch) continue;
    if (node.kind == NodeKind::kShard && node.shard.num_shards > 1) out->nodes[0].kept_by_shard = node.shard;
    return;
  }
}

}  // namespace

absl::StatusOr<ShardSpec> ShardSpecOf(const ShardDef& shard, const std::string& where) {
  ShardSpec spec;
  spec.num_shards = shard.num_shards();
  spec.index = shard.index();
  // Where the count and index came from, for the errors: the job's are $WORLD_SIZE's and $RANK's.
  std::string count_from, index_from;
  if (spec.num_shards == 0) {
    if (spec.index != 0) {
      return NodeError(where, absl::StrCat("index ", spec.index,
                                           " with num_shards 0: the job's shards come with the job's index ($RANK); "
                                           "give num_shards too, or leave index out"));
    }
    SLUICE_ASSIGN_OR_RETURN(spec.num_shards, EnvInt("WORLD_SIZE", 1, where));
    SLUICE_ASSIGN_OR_RETURN(spec.index, EnvInt("RANK", 0, where));
    SLUICE_RETURN_IF_ERROR(CheckRankIsSet(spec.num_shards, where));
    count_from = " (from $WORLD_SIZE)";
    index_from = " (from $RANK)";
  }
  if (spec.num_shards < 1) {
    return NodeError(where, absl::StrCat("num_shards must be >= 1 (0: the job's), got ", spec.num_shards, count_from));
  }
  if (spec.index < 0 || spec.index >= spec.num_shards) {
    return NodeError(where, absl::StrCat("index must be in [0, ", spec.num_shards, "), got ", spec.index, index_from));
  }
  if (shard.uneven() != "" && shard.uneven() != "drop" && shard.uneven() != "pad") {
    return NodeError(where, absl::StrCat("uneven must be \"drop\" or \"pad\", got \"", shard.uneven(), "\""));
  }
  spec.pad = shard.uneven() == "pad";
  return spec;
}

absl::Status ResolveShards(PipelineDef* def) {
  for (int i = 0; i < def->nodes_size(); ++i) {
    if (!def->nodes(i).has_shard() || def->nodes(i).shard().num_shards() != 0) continue;
    ShardDef* shard = def->mutable_nodes(i)->mutable_shard();
    SLUICE_ASSIGN_OR_RETURN(const ShardSpec spec, ShardSpecOf(*shard, absl::StrCat("nodes[", i, "] (shard)")));
    shard->set_num_shards(spec.num_shards);
    shard->set_index(spec.index);
  }
  return absl::OkStatus();
}

absl::string_view NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kSource:
      return "source";
    case NodeKind::kMap:
      return "map";
    case NodeKind::kFilter:
      return "filter";
    case NodeKind::kShuffle:
      return "shuffle";
    case NodeKind::kBatch:
      return "batch";
    case NodeKind::kPrefetch:
      return "prefetch";
    case NodeKind::kRepeat:
      return "repeat";
    case NodeKind::kTake:
      return "take";
    case NodeKind::kRemote:
      return "distribute";
    case NodeKind::kShard:
      return "shard";
  }
  return "?";
}

absl::StatusOr<int> FindDistribute(const PipelineDef& def) {
  int found = -1;
  for (int i = 0; i < def.nodes_size(); ++i) {
    if (def.nodes(i).kind_case() != NodeDef::kDistribute) continue;
    if (found >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("nodes[", i, "]: a pipeline may have one distribute node (another is nodes[", found, "])"));
    }
    if (i == 0) return absl::InvalidArgumentError("nodes[0]: the first node must be a source");
    found = i;
  }
  return found;
}

std::vector<std::string> OpsUsed(const PipelineDef& def, int begin, int end) {
  std::vector<std::string> ops;
  auto add = [&](const std::string& op) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  };
  const int stop = end < 0 ? def.nodes_size() : std::min(end, def.nodes_size());
  for (int i = std::max(begin, 0); i < stop; ++i) {
    const NodeDef& nd = def.nodes(i);
    if (nd.kind_case() == NodeDef::kMap) {
      for (const OpDef& op : nd.map().ops()) add(op.op());
    } else if (nd.kind_case() == NodeDef::kFilter) {
      add(nd.filter().predicate().op());
    }
  }
  return ops;
}

bool IsPythonOp(const std::string& op) { return op == "python" || op == "python_batch"; }

bool RunsPython(const PipelineDef& def) {
  if (def.nodes_size() > 0 && def.nodes(0).source().has_python_dataset()) return true;
  const std::vector<std::string> ops = OpsUsed(def);
  return std::any_of(ops.begin(), ops.end(), IsPythonOp);
}

std::vector<std::string> OpsAWorkerNeeds(const PipelineDef& def) {
  std::vector<std::string> ops = OpsUsed(def);
  if (RunsPython(def) && std::none_of(ops.begin(), ops.end(), IsPythonOp)) ops.push_back("python");
  return ops;
}

bool UsesDevice(const PipelineDef& def) {
  for (const NodeDef& nd : def.nodes()) {
    if (nd.kind_case() == NodeDef::kMap && !nd.map().device().empty() && nd.map().device() != "cpu") return true;
  }
  return false;
}

absl::StatusOr<CompiledPipeline> Compile(const PipelineDef& def, const ops::OpRegistry& registry,
                                         const CompileRange& range) {
  SLUICE_RETURN_IF_ERROR(CheckNumericOptions(def.options()));
  CompiledPipeline out = CompileOptions(def, registry);
  if (def.nodes_size() == 0) return absl::InvalidArgumentError("pipeline has no nodes");
  out.output_fingerprint = OutputFingerprint(def);
  out.materialized = def.options().has_materialized_from();
  const int end = range.end < 0 ? def.nodes_size() : std::min(range.end, def.nodes_size());
  if (range.begin < 0 || range.begin >= end) {
    return absl::InvalidArgumentError(absl::StrCat("no nodes in [", range.begin, ", ", end, ")"));
  }
  SLUICE_ASSIGN_OR_RETURN(const int distribute, FindDistribute(def));
  SLUICE_RETURN_IF_ERROR(CheckNamesUnique(def, distribute));
  Compiler compiler(def, registry, range, distribute, &out);
  for (int i = range.begin; i < end; ++i) SLUICE_RETURN_IF_ERROR(compiler.AddNode(i, end));
  if (range.fold_into_remote && !def.options().no_fuse_receive()) FoldIntoReceive(registry, &out);
  MarkRowsKeptByShard(&out);
  return out;
}

}  // namespace sluice::graph
