// Why parse_example scans the wire format instead of calling protobuf:
// parsing one W2 record (3,072 image bytes + a label) both ways.
#include <cstring>

#include "benchmark/benchmark.h"
#include "example.pb.h"
#include "sluice/io/example_parser.h"

namespace {

std::string W2Record() {
  sluice::Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  f["image"].mutable_bytes_list()->add_value(std::string(3072, '\x7f'));
  f["label"].mutable_int64_list()->add_value(7);
  return ex.SerializeAsString();
}

void BM_ProtobufParse(benchmark::State& state) {
  const std::string record = W2Record();
  uint8_t image[3072];
  int64_t label = 0;
  sluice::Example ex;
  for (auto _ : state) {
    ex.ParseFromString(record);
    const auto& f = ex.features().feature();
    const std::string& bytes = f.at("image").bytes_list().value(0);
    std::memcpy(image, bytes.data(), bytes.size());
    label = f.at("label").int64_list().value(0);
    benchmark::DoNotOptimize(image);
    benchmark::DoNotOptimize(label);
  }
}
BENCHMARK(BM_ProtobufParse);

void BM_ExampleParser(benchmark::State& state) {
  const std::string record = W2Record();
  const sluice::io::ExampleParser parser(
      {{"image", sluice::io::FeatureKind::kBytes, 3072}, {"label", sluice::io::FeatureKind::kInt64, 1}});
  uint8_t image[3072];
  int64_t label = 0;
  uint8_t* out[] = {image, reinterpret_cast<uint8_t*>(&label)};
  for (auto _ : state) {
    benchmark::DoNotOptimize(parser.Parse(record, out));
    benchmark::DoNotOptimize(image);
  }
}
BENCHMARK(BM_ExampleParser);

}  // namespace

BENCHMARK_MAIN();
