// Builds a PipelineDef in C++, e.g. W1:
//
//   PipelineDef def =
//       PipelineBuilder::Mnist("mnist/train-images-idx3-ubyte", "mnist/train-labels-idx1-ubyte")
//           .Map({Op("normalize", {{"mean", 0.1307}, {"std", 0.3081}, {"scale", 1 / 255.0}}),
//                 Op("gaussian_blur", {{"ksize", 11}, {"sigma", {0.1, 2.0}}})})
//           .Batch(8192)
//           .Build();
//
// The result is the same message PipelineFromJson() returns for the
// equivalent JSON, so either can be run, saved or sent to workers.
#ifndef SLUICE_GRAPH_PIPELINE_BUILDER_H_
#define SLUICE_GRAPH_PIPELINE_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "pipeline.pb.h"
#include "sluice/core/dtype.h"

namespace sluice::graph {

// An attr value written inline: a number, bool, string or list of numbers.
class AttrInit {
 public:
  AttrInit(int v) { value_.set_number_value(v); }
  AttrInit(int64_t v) { value_.set_number_value(static_cast<double>(v)); }
  AttrInit(double v) { value_.set_number_value(v); }
  AttrInit(bool v) { value_.set_bool_value(v); }
  AttrInit(const char* v) { value_.set_string_value(v); }
  AttrInit(std::string v) { value_.set_string_value(std::move(v)); }
  AttrInit(std::initializer_list<double> v) {
    for (double x : v) value_.mutable_list_value()->add_values()->set_number_value(x);
  }
  const google::protobuf::Value& value() const { return value_; }

 private:
  google::protobuf::Value value_;
};

OpDef Op(const std::string& name,
         std::initializer_list<std::pair<const char*, AttrInit>> attrs = {});

FeatureDef BytesFeature(const std::string& name, int64_t length);
FeatureDef Int64Feature(const std::string& name, std::vector<int64_t> shape = {});
FeatureDef FloatFeature(const std::string& name, std::vector<int64_t> shape = {});

// A column of an ArraySource: `values` holds every row, row-major; `shape`
// is the shape of one row.
template <typename T>
ArrayColumn MakeArrayColumn(const std::string& name, std::vector<int64_t> shape,
                            const std::vector<T>& values) {
  ArrayColumn c;
  c.set_name(name);
  c.set_dtype(std::string(DTypeName(DTypeOf<T>::value)));
  for (int64_t d : shape) c.add_shape(d);
  c.set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  return c;
}

class PipelineBuilder {
 public:
  static PipelineBuilder TfRecord(std::vector<std::string> files,
                                  std::vector<FeatureDef> features = {});
  static PipelineBuilder Mnist(const std::string& images, const std::string& labels);
  static PipelineBuilder Cifar10(std::vector<std::string> files);
  static PipelineBuilder Arrays(std::vector<ArrayColumn> columns);

  // `device`: "" or "cpu", or "cuda" (MapDef.device).
  PipelineBuilder& Map(std::vector<OpDef> ops, int parallelism = 0, const std::string& device = "");
  PipelineBuilder& Filter(OpDef predicate);
  PipelineBuilder& Shuffle(int64_t buffer_size);
  PipelineBuilder& Batch(int64_t size, bool drop_remainder = false);
  PipelineBuilder& Prefetch(int64_t buffer_size = 0);
  PipelineBuilder& Repeat(int64_t count = -1);
  PipelineBuilder& Take(int64_t count);
  // The split point: what comes before runs on the service's workers.
  PipelineBuilder& Distribute(DistributeDef options = {});
  PipelineBuilder& Seed(uint64_t seed);
  PipelineBuilder& Threads(int threads);
  // Source options.
  PipelineBuilder& SkipCorruptRecords();
  PipelineBuilder& SplitRecords(int64_t records);

  PipelineDef Build() const { return def_; }

 private:
  PipelineBuilder() = default;
  NodeDef* Add();
  PipelineDef def_;
};

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_PIPELINE_BUILDER_H_
