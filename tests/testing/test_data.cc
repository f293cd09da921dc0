#include "test_data.h"

#include <stdexcept>

#include "example.pb.h"
#include "sluice/io/tfrecord_writer.h"

namespace sluice::testing {

std::string MakeExample(const std::string& image, int64_t label) {
  Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  f["image"].mutable_bytes_list()->add_value(image);
  f["label"].mutable_int64_list()->add_value(label);
  return ex.SerializeAsString();
}

void WriteTfRecords(const std::string& path, const std::vector<std::string>& records) {
  auto writer = io::TfRecordWriter::Create(path);
  if (!writer.ok()) throw std::runtime_error(writer.status().ToString());
  for (const std::string& r : records) {
    if (!(*writer)->Write(r).ok()) throw std::runtime_error("write failed");
  }
  if (!(*writer)->Close().ok()) throw std::runtime_error("close failed");
}

std::string CifarImage(int i) {
  std::string img(3072, '\0');
  for (int j = 0; j < 3072; ++j) img[j] = static_cast<char>((i * 7 + j * 13 + (j / 96) * 5) % 256);
  return img;
}

std::vector<std::string> WriteCifarTfRecords(const std::string& dir, int n, int files) {
  std::vector<std::string> paths;
  int next = 0;
  for (int f = 0; f < files; ++f) {
    const int count = n / files + (f < n % files ? 1 : 0);
    std::vector<std::string> records;
    for (int k = 0; k < count; ++k, ++next) records.push_back(MakeExample(CifarImage(next), next % 10));
    paths.push_back(dir + "/part-" + std::to_string(f) + ".tfrecord");
    WriteTfRecords(paths.back(), records);
  }
  return paths;
}

}  // namespace sluice::testing
