// The public builder (include/sluice/pipeline_builder.h) fills a PipelineDef.
#include "sluice/pipeline_builder.h"

#include "google/protobuf/struct.pb.h"
#include "pipeline.pb.h"
#include "sluice/graph/pipeline_json.h"

namespace sluice {
namespace {

google::protobuf::Value ToProto(const AttrValue& attr) {
  google::protobuf::Value out;
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          out.set_number_value(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out.set_bool_value(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.set_string_value(v);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double x : v) out.mutable_list_value()->add_values()->set_number_value(x);
        } else {
          for (const std::string& x : v) out.mutable_list_value()->add_values()->set_string_value(x);
        }
      },
      attr.value());
  return out;
}

OpDef ToProto(const OpSpec& spec) {
  OpDef op;
  op.set_op(spec.op);
  for (const auto& [key, value] : spec.attrs) (*op.mutable_attrs()->mutable_fields())[key] = ToProto(value);
  return op;
}

}  // namespace

OpSpec Op(std::string name, std::initializer_list<std::pair<const char*, AttrValue>> attrs) {
  OpSpec op{std::move(name), {}};
  for (const auto& [key, value] : attrs) op.attrs.emplace_back(key, value);
  return op;
}

TfRecordFeature BytesFeature(const std::string& name, int64_t length) {
  return TfRecordFeature{name, "bytes", {}, length};
}
TfRecordFeature Int64Feature(const std::string& name, std::vector<int64_t> shape) {
  return TfRecordFeature{name, "int64", std::move(shape), 0};
}
TfRecordFeature FloatFeature(const std::string& name, std::vector<int64_t> shape) {
  return TfRecordFeature{name, "float32", std::move(shape), 0};
}

PipelineBuilder::PipelineBuilder() : def_(std::make_unique<PipelineDef>()) {}
PipelineBuilder::PipelineBuilder(const PipelineBuilder& other) : def_(std::make_unique<PipelineDef>(*other.def_)) {}
PipelineBuilder& PipelineBuilder::operator=(const PipelineBuilder& other) {
  if (this != &other) *def_ = *other.def_;
  return *this;
}
PipelineBuilder::~PipelineBuilder() = default;

PipelineBuilder PipelineBuilder::TfRecord(std::vector<std::string> files, std::vector<TfRecordFeature> features) {
  PipelineBuilder b;
  TfRecordSource* s = b.def_->add_nodes()->mutable_source()->mutable_tfrecord();
  for (auto& f : files) s->add_files(std::move(f));
  for (const TfRecordFeature& f : features) {
    FeatureDef* d = s->add_features();
    d->set_name(f.name);
    d->set_dtype(f.dtype);
    for (int64_t dim : f.shape) d->add_shape(dim);
    d->set_length(f.length);
  }
  return b;
}

PipelineBuilder PipelineBuilder::Mnist(const std::string& images, const std::string& labels) {
  PipelineBuilder b;
  MnistSource* s = b.def_->add_nodes()->mutable_source()->mutable_mnist();
  s->set_images(images);
  s->set_labels(labels);
  return b;
}

PipelineBuilder PipelineBuilder::Cifar10(std::vector<std::string> files) {
  PipelineBuilder b;
  Cifar10Source* s = b.def_->add_nodes()->mutable_source()->mutable_cifar10();
  for (auto& f : files) s->add_files(std::move(f));
  return b;
}

PipelineBuilder PipelineBuilder::Arrays(std::vector<NamedArray> columns) {
  PipelineBuilder b;
  ArraySource* s = b.def_->add_nodes()->mutable_source()->mutable_arrays();
  for (NamedArray& c : columns) {
    ArrayColumn* d = s->add_columns();
    d->set_name(c.name);
    d->set_dtype(std::string(DTypeName(c.dtype)));
    for (int64_t dim : c.shape) d->add_shape(dim);
    d->set_data(std::move(c.data));
  }
  return b;
}

PipelineBuilder PipelineBuilder::ImageFolder(const std::string& root) {
  PipelineBuilder b;
  b.def_->add_nodes()->mutable_source()->mutable_image_folder()->set_root(root);
  return b;
}

PipelineBuilder PipelineBuilder::FileList(const std::string& path) {
  PipelineBuilder b;
  b.def_->add_nodes()->mutable_source()->mutable_file_list()->set_path(path);
  return b;
}

PipelineBuilder PipelineBuilder::WebDataset(std::vector<std::string> shards, std::vector<WebDatasetFieldSpec> fields) {
  PipelineBuilder b;
  WebDatasetSource* source = b.def_->add_nodes()->mutable_source()->mutable_webdataset();
  for (std::string& s : shards) source->add_files(std::move(s));
  for (WebDatasetFieldSpec& f : fields) {
    ::sluice::WebDatasetField* field = source->add_fields();
    field->set_name(std::move(f.name));
    for (std::string& e : f.extensions) field->add_extensions(std::move(e));
    field->set_dtype(f.int64 ? "int64" : "bytes");
    field->set_length(f.length);
  }
  return b;
}

namespace {

void FillColumnar(std::vector<std::string> files, std::vector<std::string> columns, ColumnarSource* source) {
  for (std::string& f : files) source->add_files(std::move(f));
  for (std::string& c : columns) source->add_columns(std::move(c));
}

}  // namespace

PipelineBuilder PipelineBuilder::Parquet(std::vector<std::string> files, std::vector<std::string> columns) {
  PipelineBuilder b;
  FillColumnar(std::move(files), std::move(columns), b.def_->add_nodes()->mutable_source()->mutable_parquet());
  return b;
}

PipelineBuilder PipelineBuilder::ArrowIpc(std::vector<std::string> files, std::vector<std::string> columns) {
  PipelineBuilder b;
  FillColumnar(std::move(files), std::move(columns), b.def_->add_nodes()->mutable_source()->mutable_arrow_ipc());
  return b;
}

PipelineBuilder& PipelineBuilder::Map(std::vector<OpSpec> ops, int parallelism, const std::string& device) {
  MapDef* m = def_->add_nodes()->mutable_map();
  for (const OpSpec& op : ops) *m->add_ops() = ToProto(op);
  m->set_parallelism(parallelism);
  m->set_device(device);
  return *this;
}

PipelineBuilder& PipelineBuilder::Filter(OpSpec predicate) {
  *def_->add_nodes()->mutable_filter()->mutable_predicate() = ToProto(predicate);
  return *this;
}

PipelineBuilder& PipelineBuilder::Distribute(const DistributeOptions& o) {
  DistributeDef* d = def_->add_nodes()->mutable_distribute();
  d->set_dispatcher(o.dispatcher);
  d->set_local_workers(o.local_workers);
  d->set_mode(o.mode);
  d->set_job_name(o.job_name);
  d->set_compression(o.compression);
  d->set_max_outstanding(o.max_outstanding);
  d->set_tls_ca_file(o.tls_ca_file);
  d->set_tls_cert_file(o.tls_cert_file);
  d->set_tls_key_file(o.tls_key_file);
  d->set_token_file(o.token_file);
  d->set_connect_timeout_s(o.connect_timeout_s);
  d->set_dispatcher_timeout_s(o.dispatcher_timeout_s);
  d->set_shared_memory_mb(o.shared_memory_mb);
  return *this;
}

PipelineBuilder& PipelineBuilder::Shuffle(int64_t buffer_size) {
  def_->add_nodes()->mutable_shuffle()->set_buffer_size(buffer_size);
  return *this;
}

PipelineBuilder& PipelineBuilder::Batch(int64_t size, bool drop_remainder) {
  BatchDef* b = def_->add_nodes()->mutable_batch();
  b->set_size(size);
  b->set_drop_remainder(drop_remainder);
  return *this;
}

PipelineBuilder& PipelineBuilder::Prefetch(int64_t buffer_size) {
  def_->add_nodes()->mutable_prefetch()->set_buffer_size(buffer_size);
  return *this;
}

PipelineBuilder& PipelineBuilder::Repeat(int64_t count) {
  def_->add_nodes()->mutable_repeat()->set_count(count);
  return *this;
}

PipelineBuilder& PipelineBuilder::Take(int64_t count) {
  def_->add_nodes()->mutable_take()->set_count(count);
  return *this;
}

PipelineBuilder& PipelineBuilder::Shard(int num_shards, int index, const std::string& uneven) {
  ShardDef* shard = def_->add_nodes()->mutable_shard();
  shard->set_num_shards(num_shards);
  shard->set_index(index);
  shard->set_uneven(uneven);
  return *this;
}

PipelineBuilder& PipelineBuilder::Named(const std::string& node_name) {
  def_->mutable_nodes(def_->nodes_size() - 1)->set_name(node_name);
  return *this;
}

PipelineBuilder& PipelineBuilder::Name(const std::string& name) {
  def_->set_name(name);
  return *this;
}

PipelineBuilder& PipelineBuilder::Seed(uint64_t seed) {
  def_->set_seed(seed);
  return *this;
}

PipelineBuilder& PipelineBuilder::Threads(int threads) {
  def_->mutable_options()->set_threads(threads);
  return *this;
}

PipelineBuilder& PipelineBuilder::MemoryBudget(int64_t bytes) {
  def_->mutable_options()->set_memory_budget_bytes(bytes);
  return *this;
}

PipelineBuilder& PipelineBuilder::Unordered(bool unordered) {
  def_->mutable_options()->set_unordered(unordered);
  return *this;
}

PipelineBuilder& PipelineBuilder::Placement(const std::string& placement) {
  def_->mutable_options()->set_placement(placement);
  return *this;
}

PipelineBuilder& PipelineBuilder::ShuffleSplits() {
  def_->mutable_nodes(0)->mutable_source()->set_shuffle_splits(true);
  return *this;
}

PipelineBuilder& PipelineBuilder::SkipCorruptRecords() {
  def_->mutable_nodes(0)->mutable_source()->set_on_corrupt("skip");
  return *this;
}

PipelineBuilder& PipelineBuilder::SplitRecords(int64_t records) {
  def_->mutable_nodes(0)->mutable_source()->set_split_records(records);
  return *this;
}

PipelineBuilder& PipelineBuilder::ParallelReads(int readers) {
  def_->mutable_nodes(0)->mutable_source()->set_parallel_reads(readers);
  return *this;
}

PipelineBuilder& PipelineBuilder::CacheObjects(const std::string& dir, int64_t max_bytes) {
  ObjectCacheDef* cache = def_->mutable_nodes(0)->mutable_source()->mutable_object_cache();
  cache->set_dir(dir);
  cache->set_max_bytes(max_bytes);
  return *this;
}

std::string PipelineBuilder::ToJson() const { return graph::PipelineToJson(*def_); }

PipelineDef PipelineBuilder::Build() const { return *def_; }

}  // namespace sluice
