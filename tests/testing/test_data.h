// Small datasets in the real formats, written by the tests themselves.
#ifndef SLUICE_TESTS_TESTING_TEST_DATA_H_
#define SLUICE_TESTS_TESTING_TEST_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::testing {

// A tf.train.Example with a bytes feature `image` and an int64 `label`,
// serialized with protobuf (the independent writer).
std::string MakeExample(const std::string& image, int64_t label);

// Writes `records` to a TFRecord file.
void WriteTfRecords(const std::string& path, const std::vector<std::string>& records);

// `n` CIFAR-like records (3,072 image bytes of value (i + j) % 256 pattern,
// label i % 10) in `files` TFRecord files DIR/part-K.tfrecord; returns paths.
std::vector<std::string> WriteCifarTfRecords(const std::string& dir, int n, int files);

// The image bytes of record i in WriteCifarTfRecords.
std::string CifarImage(int i);

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_TEST_DATA_H_
