#include "sluice/profile/materialize.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "example.pb.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/exec/resume.h"
#include "sluice/graph/fingerprint.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/io/staged_directory.h"
#include "sluice/io/tfrecord_index.h"
#include "sluice/io/tfrecord_writer.h"
#include "sluice/ops/parse_example.h"

namespace sluice::profile {
namespace {

// Leading map nodes after the source, on the CPU, whose ops all draw no
// random numbers: neither random ops nor ones that may draw unseen (a
// Python function not declared deterministic).
int DeterministicMaps(const graph::CompiledPipeline& compiled) {
  int n = 0;
  for (size_t i = 1; i < compiled.nodes.size(); ++i) {
    const graph::CompiledNode& node = compiled.nodes[i];
    if (node.kind != graph::NodeKind::kMap || node.backend != ops::Backend::kCpu) break;
    for (const graph::BoundOp& op : node.ops) {
      if (op.inferred.random || op.inferred.draws_unseen) return n;
    }
    ++n;
  }
  return n;
}

// Where the leading maps' first op that is not deterministic may draw
// unseen: what to do.
std::string UnseenDrawsHint(const graph::CompiledPipeline& compiled) {
  for (size_t i = 1; i < compiled.nodes.size() && compiled.nodes[i].kind == graph::NodeKind::kMap; ++i) {
    for (const graph::BoundOp& op : compiled.nodes[i].ops) {
      if (op.inferred.random) return "";
      if (!op.inferred.draws_unseen) continue;
      return absl::StrCat(
          "; op '", op.name,
          "' runs a Python function, which may draw from a global generator (numpy's, torch's, random's) that "
          "sluice cannot see; written once, its augmentation would be the same every epoch. If it draws nothing, "
          "say so: ops.python(..., deterministic=True) (the op's `deterministic` attr)");
    }
  }
  return "";
}

// The ops of the first `maps` maps whose work the materialized records
// save: not views, nor the parse of a TFRecord's features, which the
// rewritten pipeline does again.
std::vector<std::string> MaterializedOps(const graph::CompiledPipeline& compiled, int maps) {
  std::vector<std::string> names;
  for (int i = 1; i <= maps; ++i) {
    for (const graph::BoundOp& op : compiled.nodes[i].ops) {
      if (!op.view && op.op != ops::kParseExampleOp) names.push_back(op.name);
    }
  }
  return names;
}

// 1 when compiling added a map of its own after the source, parsing a
// TFRecord source's features (the node after it in `def` is no CPU map to
// take the parse in): compiled node i is then def node i - 1.
int AddedParseMaps(const PipelineDef& def, const graph::CompiledPipeline& compiled) {
  if (compiled.nodes.size() < 2 || compiled.nodes[1].kind != graph::NodeKind::kMap) return 0;
  if (def.nodes_size() < 2 || def.nodes(1).kind_case() != NodeDef::kMap) return 1;
  const std::string& device = def.nodes(1).map().device();
  return device.empty() || device == "cpu" ? 0 : 1;
}

// A uint8 or int32 scalar: stored as an int64 feature and cast back (a
// bytes feature of it would read back as a vector of one).
bool WidenedScalar(const ColumnSpec& c) {
  return c.shape.rank() == 0 && (c.dtype == DType::kUInt8 || c.dtype == DType::kInt32);
}

void AddOp(MapDef* map, const std::string& name, const std::string& field, const std::string& dtype) {
  OpDef* op = map->add_ops();
  op->set_op(name);
  (*op->mutable_attrs()->mutable_fields())["field"].set_string_value(field);
  (*op->mutable_attrs()->mutable_fields())["dtype"].set_string_value(dtype);
}

// How each column is stored and read back: int64 and float32 as numeric
// features of their shape; uint8 and int32 arrays as bytes (decoded and
// reshaped by the rewritten pipeline's first map), their scalars as int64.
void DeclareColumns(const Schema& schema, TfRecordSource* source, MapDef* decode) {
  for (const ColumnSpec& c : schema.columns()) {
    FeatureDef* f = source->add_features();
    f->set_name(c.name);
    if (WidenedScalar(c)) {
      f->set_dtype("int64");
      AddOp(decode, "cast", c.name, std::string(DTypeName(c.dtype)));
      continue;
    }
    if (c.dtype == DType::kInt64 || c.dtype == DType::kFloat32) {
      f->set_dtype(c.dtype == DType::kInt64 ? "int64" : "float32");
      for (int64_t d : c.shape.dims()) f->add_shape(d);
      continue;
    }
    f->set_dtype("bytes");
    f->set_length(c.shape.num_elements() * static_cast<int64_t>(DTypeSize(c.dtype)));
    if (c.dtype != DType::kUInt8) AddOp(decode, "decode_raw", c.name, std::string(DTypeName(c.dtype)));
    OpDef* op = decode->add_ops();
    op->set_op("reshape");
    (*op->mutable_attrs()->mutable_fields())["field"].set_string_value(c.name);
    google::protobuf::ListValue* shape = (*op->mutable_attrs()->mutable_fields())["shape"].mutable_list_value();
    for (int64_t d : c.shape.dims()) shape->add_values()->set_number_value(static_cast<double>(d));
  }
}

// Row `r` of `batch` as a tf.train.Example.
std::string ExampleOf(const Batch& batch, const Schema& schema, int64_t r) {
  Example ex;
  auto& features = *ex.mutable_features()->mutable_feature();
  for (size_t c = 0; c < schema.columns().size(); ++c) {
    const ColumnSpec& spec = schema.columns()[c];
    const Tensor& t = batch.columns[c].values;
    const int64_t n = spec.shape.num_elements();
    Feature& f = features[spec.name];
    if (WidenedScalar(spec)) {
      f.mutable_int64_list()->add_value(spec.dtype == DType::kUInt8 ? t.data<uint8_t>()[r] : t.data<int32_t>()[r]);
    } else if (spec.dtype == DType::kInt64) {
      const int64_t* v = t.data<int64_t>() + r * n;
      f.mutable_int64_list()->mutable_value()->Add(v, v + n);
    } else if (spec.dtype == DType::kFloat32) {
      const float* v = t.data<float>() + r * n;
      f.mutable_float_list()->mutable_value()->Add(v, v + n);
    } else {
      const size_t bytes = static_cast<size_t>(n) * DTypeSize(spec.dtype);
      f.mutable_bytes_list()->add_value(reinterpret_cast<const char*>(t.raw_data()) + r * bytes, bytes);
    }
  }
  return graph::DeterministicBytes(ex);  // features in name order: the same file from every run
}

// FailedPrecondition for columns no fixed feature can hold.
absl::Status CheckWritable(const graph::CompiledNode& last) {
  for (const ColumnSpec& c : last.output_schema.columns()) {
    if (c.ragged) {
      return absl::FailedPreconditionError(
          absl::StrCat("node '", last.name, "' outputs column '", c.name,
                       "' of varying length, which cannot be written as fixed features"));
    }
    if (c.dtype == DType::kFloat16 && c.shape.rank() == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "column '", c.name, "': a float16 scalar cannot be materialized; cast it to float32 in the pipeline first"));
    }
  }
  return absl::OkStatus();
}

// The source and the first `maps` maps, reading its splits in file order so
// records go out in order.
PipelineDef PrefixOf(const PipelineDef& def, int maps) {
  PipelineDef prefix = def;
  prefix.clear_nodes();
  for (int i = 0; i <= maps; ++i) *prefix.add_nodes() = def.nodes(i);
  prefix.mutable_nodes(0)->mutable_source()->set_shuffle_splits(false);
  prefix.mutable_options()->set_unordered(false);
  return prefix;
}

// The name of the materialized records of source file `i` of `n`.
std::string PartName(size_t i, size_t n) { return absl::StrFormat("part-%05d-of-%05d.tfrecord", i, n); }

// That `out_dir` holds none of the source's files: the parts written beside
// them could replace one of the same name, or be listed by the source's
// pattern (`data/*.tfrecord`) and read as its records too.
absl::Status CheckOutsideSourceFolders(const std::string& out_dir, const std::vector<std::string>& sources) {
  std::error_code ec;
  std::filesystem::path out = std::filesystem::weakly_canonical(out_dir, ec);
  if (!out.has_filename()) out = out.parent_path();  // "dir/"
  for (const std::string& source : sources) {
    if (std::filesystem::weakly_canonical(source, ec).parent_path() == out) {
      return absl::FailedPreconditionError(
          absl::StrCat("the output folder ", out_dir, " holds the source's file ", source,
                       ": the materialized records written beside it could replace it, or be listed with it by the "
                       "source's pattern; give another folder"));
    }
  }
  return absl::OkStatus();
}

// The parts of an earlier materialization into `out_dir` from another
// number of source files: its pipeline.json was replaced, and they would
// lie there unused.
void RemoveOlderParts(const std::string& out_dir, size_t parts) {
  std::error_code ec;
  std::vector<std::filesystem::path> older;
  for (const auto& entry : std::filesystem::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    int index = 0, of = 0, end = 0;
    if (std::sscanf(name.c_str(), "part-%d-of-%d.tfrecord%n", &index, &of, &end) != 2) continue;
    const std::string part = PartName(index, of);
    const bool ours = name == part || name == io::TfRecordIndexPath(part);
    if (ours && static_cast<size_t>(of) != parts) older.push_back(entry.path());
  }
  for (const std::filesystem::path& path : older) std::filesystem::remove(path, ec);
}

// One TFRecord writer per source file, empty ones included, so that a
// record's file index stays; each record in its source file's order.
class PartWriters {
 public:
  static absl::StatusOr<PartWriters> Create(const std::string& out_dir, const std::vector<std::string>& sources,
                                            MaterializeResult* result) {
    PartWriters parts(sources, result);
    for (size_t i = 0; i < sources.size(); ++i) {
      const std::string path = absl::StrCat(out_dir, "/", PartName(i, sources.size()));
      SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<io::TfRecordWriter> w, io::TfRecordWriter::Create(path));
      parts.writers_.push_back(std::move(w));
      result->files.push_back(path);
    }
    return parts;
  }

  // Writes row r of `batch` to its source file's part.
  absl::Status Write(const Batch& batch, const Schema& schema, int64_t r) {
    const RowOrigin origin = batch.provenance.Origin(r);
    if (origin.file < 0 || origin.file >= static_cast<int>(sources_.size())) {
      return absl::InternalError(absl::StrCat("row ", result_->records, " has no source file"));
    }
    int64_t& expected = next_record_[origin.file];
    if (origin.record > std::max<int64_t>(expected, 0)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "record ", std::max<int64_t>(expected, 0), " of ", sources_[origin.file],
          " was skipped as corrupt: the records written would be numbered otherwise, and the draws keyed by "
          "their numbers would change"));
    }
    if (expected >= 0 && origin.record != expected) {
      return absl::InternalError(absl::StrCat("records of ", sources_[origin.file], " arrived out of order (",
                                              origin.record, " after ", expected - 1, ")"));
    }
    expected = origin.record + 1;
    const std::string record = ExampleOf(batch, schema, r);
    SLUICE_RETURN_IF_ERROR(writers_[origin.file]->Write(record));
    result_->bytes += static_cast<int64_t>(record.size());
    ++result_->records;
    return absl::OkStatus();
  }

  // Closes every part and indexes it.
  absl::Status Close() {
    for (size_t i = 0; i < writers_.size(); ++i) {
      SLUICE_RETURN_IF_ERROR(writers_[i]->Close());
      SLUICE_RETURN_IF_ERROR(io::WriteTfRecordIndex(result_->files[i]).status());
    }
    return absl::OkStatus();
  }

 private:
  PartWriters(const std::vector<std::string>& sources, MaterializeResult* result)
      : sources_(sources), result_(result), next_record_(sources.size(), -1) {}

  const std::vector<std::string>& sources_;
  MaterializeResult* result_;
  std::vector<int64_t> next_record_;  // per source file
  std::vector<std::unique_ptr<io::TfRecordWriter>> writers_;
};

bool WholeFiles(const std::vector<io::Split>& splits) {
  for (const io::Split& split : splits) {
    if (split.begin_record != 0 || split.end_record >= 0) return false;
  }
  return true;
}

// Whether the records written can be read in the source's order: its
// splits are whole files or runs of `split_records` (not a format's own,
// such as Parquet's row groups), and a shuffle that selects records by
// number (which the records written allow) does so in the source too.
absl::Status CheckReproducibleOrder(const graph::CompiledPipeline& compiled, int64_t split_records) {
  const graph::CompiledNode& source = compiled.nodes[0];
  const std::vector<io::Split> splits = source.format->MakeSplits();
  if (!WholeFiles(splits)) {
    std::vector<int64_t> records(source.format->files()->size(), 0);
    bool known = true;
    for (const io::Split& split : splits) {
      known = known && split.end_record >= 0;
      records[split.file] = std::max(records[split.file], split.end_record);
    }
    const std::vector<io::Split> cut = io::MakeRecordSplits(records, split_records);
    bool same = known && cut.size() == splits.size();
    for (size_t i = 0; same && i < cut.size(); ++i) {
      same = cut[i].file == splits[i].file && cut[i].begin_record == splits[i].begin_record &&
             cut[i].end_record == splits[i].end_record;
    }
    if (!same) {
      return absl::FailedPreconditionError(
          "the source's splits are its format's own (not whole files or runs of split_records, as an IDX file's or "
          "Parquet's row groups): the records written could not be read in the same order");
    }
  }
  if (!source.format->SeeksRecords() && exec::Has(compiled, graph::NodeKind::kShuffle)) {
    return absl::FailedPreconditionError(
        "the shuffle draws from a buffer of what this source reads, where it would pick the records written by "
        "number: they would come in another order");
  }
  return absl::OkStatus();
}

// The rewritten pipeline: the records, a map that restores dtypes and
// shapes, then the rest of `def` after its first `maps` maps, under their
// own names (random keys depend on them).
PipelineDef Rewritten(const PipelineDef& def, const graph::CompiledPipeline& compiled, int maps, const Schema& schema,
                      const std::vector<std::string>& files) {
  const size_t added = AddedParseMaps(def, compiled);
  PipelineDef out = def;
  out.clear_nodes();
  out.mutable_options()->clear_materialized_from();
  NodeDef* source = out.add_nodes();
  source->set_name(compiled.nodes[0].name);
  const SourceDef& original = def.nodes(0).source();
  SourceDef* s = source->mutable_source();
  s->set_shuffle_splits(original.shuffle_splits());
  s->set_on_corrupt(original.on_corrupt());
  s->set_parallel_reads(original.parallel_reads());
  // Splits as the source's: whole files where it could not cut them
  // (records it cannot seek to without an index).
  s->set_split_records(WholeFiles(compiled.nodes[0].format->MakeSplits()) ? 0 : original.split_records());
  for (const std::string& f : files) s->mutable_tfrecord()->add_files(f);
  NodeDef* decode = out.add_nodes();
  decode->set_name("materialized");
  DeclareColumns(schema, s->mutable_tfrecord(), decode->mutable_map());
  if (decode->map().ops_size() == 0) out.mutable_nodes()->RemoveLast();  // nothing to restore
  for (int i = maps + 1; i < def.nodes_size(); ++i) {
    NodeDef* n = out.add_nodes();
    *n = def.nodes(i);
    const size_t at = static_cast<size_t>(i) + added;
    n->set_name(compiled.nodes.size() > at ? compiled.nodes[at].name : def.nodes(i).name());
  }
  const std::string rewritten = graph::OutputFingerprint(out);
  MaterializedFrom* from = out.mutable_options()->mutable_materialized_from();
  from->set_rewritten_fingerprint(rewritten);
  from->set_output_fingerprint(graph::OutputFingerprint(def));
  return out;
}

absl::Status WriteJson(const PipelineDef& def, const std::string& path) {
  std::ofstream json(path);
  json << graph::PipelineToJson(def) << "\n";
  json.close();
  if (!json) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

int MaterializableMaps(const PipelineDef& def, const graph::CompiledPipeline& compiled) {
  if (compiled.nodes.empty() || compiled.nodes[0].kind != graph::NodeKind::kSource) return 0;
  const int maps = DeterministicMaps(compiled);
  if (maps == 0 || MaterializedOps(compiled, maps).empty() || !CheckWritable(compiled.nodes[maps]).ok()) return 0;
  return CheckReproducibleOrder(compiled, def.nodes(0).source().split_records()).ok() ? maps : 0;
}

bool ReadsBackInOrder(const PipelineDef& def, const graph::CompiledPipeline& compiled) {
  return !compiled.nodes.empty() && compiled.nodes[0].kind == graph::NodeKind::kSource &&
         CheckReproducibleOrder(compiled, def.nodes(0).source().split_records()).ok();
}

absl::StatusOr<MaterializeResult> Materialize(const PipelineDef& def, const std::string& out_dir,
                                              const std::function<void(int64_t records)>& progress,
                                              const std::atomic<bool>* stop) {
  SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline compiled, graph::Compile(def));
  const int maps = DeterministicMaps(compiled);
  if (maps == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nothing to materialize: the node after the source is not a map of ops that draw no random numbers",
        UnseenDrawsHint(compiled)));
  }
  SLUICE_RETURN_IF_ERROR(CheckWritable(compiled.nodes[maps]));
  const std::vector<std::string> done = MaterializedOps(compiled, maps);
  if (done.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing to materialize: the maps before the first random op only parse the source's records, "
                     "which the rewritten pipeline would parse again",
                     UnseenDrawsHint(compiled)));
  }
  SLUICE_RETURN_IF_ERROR(CheckReproducibleOrder(compiled, def.nodes(0).source().split_records()));
  // The maps of `def` the compiled ones are (a parse compiling added is
  // the source's own).
  const int def_maps = maps - AddedParseMaps(def, compiled);
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(PrefixOf(def, def_maps)));
  const Schema& schema = pipeline->output_schema();
  const std::vector<std::string>& sources = *compiled.nodes[0].format->files();
  SLUICE_RETURN_IF_ERROR(CheckOutsideSourceFolders(out_dir, sources));

  MaterializeResult result;
  SLUICE_ASSIGN_OR_RETURN(io::StagedDirectory staged, io::StagedDirectory::Create(out_dir));
  SLUICE_ASSIGN_OR_RETURN(PartWriters parts, PartWriters::Create(staged.staging(), sources, &result));
  std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate(0);
  while (true) {
    Batch batch;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it->Next(&batch, &end));
    if (end) break;
    if (stop != nullptr && stop->load()) return absl::CancelledError("materializing was stopped");
    for (int64_t r = 0; r < batch.rows; ++r) SLUICE_RETURN_IF_ERROR(parts.Write(batch, schema, r));
    progress(result.records);
  }
  SLUICE_RETURN_IF_ERROR(parts.Close());

  // Absolute: the rewritten pipeline runs from any folder.
  for (std::string& f : result.files) {
    f = std::filesystem::absolute(staged.Final(std::filesystem::path(f).filename().string())).lexically_normal();
  }
  result.rewritten = Rewritten(def, compiled, def_maps, schema, result.files);
  result.ops = done;
  SLUICE_RETURN_IF_ERROR(WriteJson(result.rewritten, staged.staging() + "/pipeline.json"));
  SLUICE_RETURN_IF_ERROR(staged.Commit("pipeline.json"));
  RemoveOlderParts(out_dir, sources.size());
  result.pipeline_path = staged.Final("pipeline.json");
  return result;
}

}  // namespace sluice::profile
