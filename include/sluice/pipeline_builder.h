// Builds a pipeline definition in C++, e.g. W1:
//
//   sluice::PipelineBuilder w1 =
//       sluice::PipelineBuilder::Mnist("mnist/train-images-idx3-ubyte", "mnist/train-labels-idx1-ubyte")
//           .Map({sluice::Op("normalize", {{"mean", 0.1307}, {"std", 0.3081}, {"scale", 1 / 255.0}}),
//                 sluice::Op("gaussian_blur", {{"ksize", 11}, {"sigma", {0.1, 2.0}}})})
//           .Batch(8192);
//   absl::StatusOr<sluice::Pipeline> pipeline = sluice::Pipeline::FromBuilder(w1);
//
// ToJson() is the same definition as JSON (what `sluice run` reads and the
// Python builder writes), so either can be run, saved or sent to workers.
#ifndef SLUICE_PIPELINE_BUILDER_H_
#define SLUICE_PIPELINE_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/core/dtype.h"

namespace sluice {

class PipelineDef;  // proto/pipeline.proto, for sluice's own code

// An attr value written inline: a number, bool, string, or list of numbers
// or strings.
class AttrValue {
 public:
  using Value = std::variant<double, bool, std::string, std::vector<double>, std::vector<std::string>>;
  AttrValue(int v) : value_(static_cast<double>(v)) {}
  AttrValue(int64_t v) : value_(static_cast<double>(v)) {}
  AttrValue(double v) : value_(v) {}
  AttrValue(bool v) : value_(v) {}
  AttrValue(const char* v) : value_(std::string(v)) {}
  AttrValue(std::string v) : value_(std::move(v)) {}
  AttrValue(std::initializer_list<double> v) : value_(std::vector<double>(v)) {}
  AttrValue(std::vector<double> v) : value_(std::move(v)) {}
  AttrValue(const std::vector<int64_t>& v) : value_(std::vector<double>(v.begin(), v.end())) {}
  AttrValue(std::vector<std::string> v) : value_(std::move(v)) {}
  const Value& value() const { return value_; }

 private:
  Value value_;
};

// One op of a map (or a filter's predicate): its registered name and attrs.
struct OpSpec {
  std::string op;
  std::vector<std::pair<std::string, AttrValue>> attrs;
};

OpSpec Op(std::string name, std::initializer_list<std::pair<const char*, AttrValue>> attrs = {});

// A tf.train.Example feature a tfrecord source declares.
struct TfRecordFeature {
  std::string name;
  std::string dtype;           // "bytes", "int64" or "float32"
  std::vector<int64_t> shape;  // int64 / float32: per record (empty: a scalar)
  int64_t length = 0;          // bytes: exact length, or 0 for any length
};
TfRecordFeature BytesFeature(const std::string& name, int64_t length = 0);
TfRecordFeature Int64Feature(const std::string& name, std::vector<int64_t> shape = {});
TfRecordFeature FloatFeature(const std::string& name, std::vector<int64_t> shape = {});

// A column of a WebDataset source: the member with one of `extensions`
// ("jpg"), as bytes (with `length` > 0: all that long, a dense column), or
// with `int64` its text as one integer (".cls").
struct WebDatasetFieldSpec {
  std::string name;
  std::vector<std::string> extensions;
  bool int64 = false;
  int64_t length = 0;
};

// A column of an arrays source: `data` holds every row, row-major and
// little-endian; `shape` is one row's.
struct NamedArray {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string data;
};

template <typename T>
NamedArray MakeArrayColumn(const std::string& name, std::vector<int64_t> shape, const std::vector<T>& values) {
  return NamedArray{name, DTypeOf<T>::value, std::move(shape),
                    std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T))};
}

// Where the nodes before a distribute node run (docs/service.md).
struct DistributeOptions {
  std::string dispatcher;   // host:port; empty: an embedded dispatcher with local workers
  int local_workers = 0;    // embedded only; 0 means 1
  std::string mode;         // "distributed_epoch" (default) or "parallel_epochs"
  std::string job_name;     // consumers naming one job share it
  std::string compression;  // "", "zstd" or "lz4"
  int max_outstanding = 0;  // batches in flight per worker stream; 0 means 4
  std::string tls_ca_file, tls_cert_file, tls_key_file;
  std::string token_file;
  double connect_timeout_s = 0;     // 0 means 30 s
  double dispatcher_timeout_s = 0;  // unreachable mid-epoch this long, reading fails; 0 means 60 s
  // Workers on this host hand batches over in a shared-memory ring of this
  // many MiB per stream instead of TCP; 0 means 64, or three of the
  // stream's batches when larger (up to 1 GiB); -1 turns it off.
  int shared_memory_mb = 0;
};

// Nodes are added in order; the first is the source.
class PipelineBuilder {
 public:
  static PipelineBuilder TfRecord(std::vector<std::string> files, std::vector<TfRecordFeature> features = {});
  static PipelineBuilder Mnist(const std::string& images, const std::string& labels);
  static PipelineBuilder Cifar10(std::vector<std::string> files);
  static PipelineBuilder Arrays(std::vector<NamedArray> columns);
  static PipelineBuilder ImageFolder(const std::string& root);
  static PipelineBuilder FileList(const std::string& path);
  // WebDataset tar shards (paths or globs); `fields` empty: "image" (jpg,
  // jpeg, png, webp) and "label" (cls, int64). See WebDatasetFieldSpec.
  static PipelineBuilder WebDataset(std::vector<std::string> shards, std::vector<WebDatasetFieldSpec> fields = {});
  // Parquet files (a split per row group) and Arrow IPC files (a split per
  // record batch), paths or globs; `columns` empty: every column.
  static PipelineBuilder Parquet(std::vector<std::string> files, std::vector<std::string> columns = {});
  static PipelineBuilder ArrowIpc(std::vector<std::string> files, std::vector<std::string> columns = {});

  // Copies (and moves, which copy) are deep: every builder holds its own
  // definition.
  PipelineBuilder(const PipelineBuilder& other);
  PipelineBuilder& operator=(const PipelineBuilder& other);
  ~PipelineBuilder();

  // `device`: "" or "cpu", or "cuda" (a CUDA build of sluice and a GPU).
  PipelineBuilder& Map(std::vector<OpSpec> ops, int parallelism = 0, const std::string& device = "");
  PipelineBuilder& Filter(OpSpec predicate);
  PipelineBuilder& Shuffle(int64_t buffer_size);
  PipelineBuilder& Batch(int64_t size, bool drop_remainder = false);
  PipelineBuilder& Prefetch(int64_t buffer_size = 0);
  PipelineBuilder& Repeat(int64_t count = -1);
  PipelineBuilder& Take(int64_t count);
  // Data-parallel training: shard `index` of `num_shards` takes its part of
  // every global batch (ShardDef; 0 shards: the job's, from WORLD_SIZE and
  // RANK). `uneven`: "drop" or "pad".
  PipelineBuilder& Shard(int num_shards = 0, int index = 0, const std::string& uneven = "drop");
  // The split point: what comes before runs on the service's workers.
  PipelineBuilder& Distribute(const DistributeOptions& options = {});
  // Names the node added last (errors, statistics and a shuffle's draws
  // name it; a map's ops draw by op and their count among the earlier ops
  // of that kind, whatever the node's name). The default is
  // "<kind>_<position>".
  PipelineBuilder& Named(const std::string& node_name);
  // Names the pipeline.
  PipelineBuilder& Name(const std::string& name);
  PipelineBuilder& Seed(uint64_t seed);
  PipelineBuilder& Threads(int threads);
  // The bound on the host memory the engine holds (docs/memory.md); unset,
  // a default sized to the machine.
  PipelineBuilder& MemoryBudget(int64_t bytes);
  // Elements as they complete instead of in the source's order.
  PipelineBuilder& Unordered(bool unordered = true);
  // "auto": sluice chooses where the pipeline runs from what the job
  // measures (docs/placement.md); "manual" (the default): as written.
  PipelineBuilder& Placement(const std::string& placement);
  // Source options.
  PipelineBuilder& ShuffleSplits();
  PipelineBuilder& SkipCorruptRecords();
  PipelineBuilder& SplitRecords(int64_t records);
  // Reads `readers` splits at once, handing them on in order (each reader
  // holds a whole split in memory: keep splits small with SplitRecords).
  PipelineBuilder& ParallelReads(int readers);
  // Keeps a local copy of the objects read (s3://, gs://) in `dir`, at most
  // `max_bytes`, so that later epochs read local disk (docs/formats.md).
  PipelineBuilder& CacheObjects(const std::string& dir, int64_t max_bytes);

  // The definition as JSON.
  std::string ToJson() const;
  // The definition (sluice's own code; needs proto/pipeline.pb.h).
  PipelineDef Build() const;

 private:
  PipelineBuilder();
  std::unique_ptr<PipelineDef> def_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_BUILDER_H_
