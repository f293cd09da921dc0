#include "sluice/graph/pipeline_builder.h"

namespace sluice::graph {

OpDef Op(const std::string& name, std::initializer_list<std::pair<const char*, AttrInit>> attrs) {
  OpDef op;
  op.set_op(name);
  for (const auto& [key, value] : attrs) (*op.mutable_attrs()->mutable_fields())[key] = value.value();
  return op;
}

FeatureDef BytesFeature(const std::string& name, int64_t length) {
  FeatureDef f;
  f.set_name(name);
  f.set_dtype("bytes");
  f.set_length(length);
  return f;
}

static FeatureDef ValueFeature(const std::string& name, const char* dtype,
                               const std::vector<int64_t>& shape) {
  FeatureDef f;
  f.set_name(name);
  f.set_dtype(dtype);
  for (int64_t d : shape) f.add_shape(d);
  return f;
}

FeatureDef Int64Feature(const std::string& name, std::vector<int64_t> shape) {
  return ValueFeature(name, "int64", shape);
}

FeatureDef FloatFeature(const std::string& name, std::vector<int64_t> shape) {
  return ValueFeature(name, "float32", shape);
}

NodeDef* PipelineBuilder::Add() { return def_.add_nodes(); }

PipelineBuilder PipelineBuilder::TfRecord(std::vector<std::string> files,
                                          std::vector<FeatureDef> features) {
  PipelineBuilder b;
  TfRecordSource* s = b.Add()->mutable_source()->mutable_tfrecord();
  for (auto& f : files) s->add_files(std::move(f));
  for (auto& f : features) *s->add_features() = std::move(f);
  return b;
}

PipelineBuilder PipelineBuilder::Mnist(const std::string& images, const std::string& labels) {
  PipelineBuilder b;
  MnistSource* s = b.Add()->mutable_source()->mutable_mnist();
  s->set_images(images);
  s->set_labels(labels);
  return b;
}

PipelineBuilder PipelineBuilder::Cifar10(std::vector<std::string> files) {
  PipelineBuilder b;
  Cifar10Source* s = b.Add()->mutable_source()->mutable_cifar10();
  for (auto& f : files) s->add_files(std::move(f));
  return b;
}

PipelineBuilder PipelineBuilder::Arrays(std::vector<ArrayColumn> columns) {
  PipelineBuilder b;
  ArraySource* s = b.Add()->mutable_source()->mutable_arrays();
  for (auto& c : columns) *s->add_columns() = std::move(c);
  return b;
}

PipelineBuilder& PipelineBuilder::Map(std::vector<OpDef> ops, int parallelism, const std::string& device) {
  MapDef* m = Add()->mutable_map();
  for (auto& op : ops) *m->add_ops() = std::move(op);
  m->set_parallelism(parallelism);
  m->set_device(device);
  return *this;
}

PipelineBuilder& PipelineBuilder::Filter(OpDef predicate) {
  *Add()->mutable_filter()->mutable_predicate() = std::move(predicate);
  return *this;
}

PipelineBuilder& PipelineBuilder::Distribute(DistributeDef options) {
  *Add()->mutable_distribute() = std::move(options);
  return *this;
}

PipelineBuilder& PipelineBuilder::Shuffle(int64_t buffer_size) {
  Add()->mutable_shuffle()->set_buffer_size(buffer_size);
  return *this;
}

PipelineBuilder& PipelineBuilder::Batch(int64_t size, bool drop_remainder) {
  BatchDef* b = Add()->mutable_batch();
  b->set_size(size);
  b->set_drop_remainder(drop_remainder);
  return *this;
}

PipelineBuilder& PipelineBuilder::Prefetch(int64_t buffer_size) {
  Add()->mutable_prefetch()->set_buffer_size(buffer_size);
  return *this;
}

PipelineBuilder& PipelineBuilder::Repeat(int64_t count) {
  Add()->mutable_repeat()->set_count(count);
  return *this;
}

PipelineBuilder& PipelineBuilder::Take(int64_t count) {
  Add()->mutable_take()->set_count(count);
  return *this;
}

PipelineBuilder& PipelineBuilder::Seed(uint64_t seed) {
  def_.set_seed(seed);
  return *this;
}

PipelineBuilder& PipelineBuilder::Threads(int threads) {
  def_.mutable_options()->set_threads(threads);
  return *this;
}

PipelineBuilder& PipelineBuilder::SkipCorruptRecords() {
  def_.mutable_nodes(0)->mutable_source()->set_on_corrupt("skip");
  return *this;
}

PipelineBuilder& PipelineBuilder::SplitRecords(int64_t records) {
  def_.mutable_nodes(0)->mutable_source()->set_split_records(records);
  return *this;
}

}  // namespace sluice::graph
