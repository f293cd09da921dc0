// Synthetic datasets in the real on-disk formats, for demos, benches and
// tests: MNIST IDX files and CIFAR-10 records (TFRecord or binary).
#ifndef SLUICE_DATAGEN_SYNTHETIC_DATA_H_
#define SLUICE_DATAGEN_SYNTHETIC_DATA_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace sluice {
class Example;
}  // namespace sluice

namespace sluice::datagen {

// Called with (done, total) as work progresses.
using Progress = std::function<void(int64_t, int64_t)>;

struct MnistPaths {
  std::string train_images, train_labels, test_images, test_labels;
};
// torchvision's layout: DIR/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte.
MnistPaths MnistLayout(const std::string& dir);

// `count` training images (and count / 6 test images) of 28x28 digit-like
// strokes, labels 0..9.
absl::Status WriteSyntheticMnist(const std::string& dir, int64_t count, uint64_t seed, const Progress& progress);

// `count` 32x32x3 images of smooth colour fields and blobs. As TFRecords:
// DIR/train-0000i-of-0000n.tfrecord holding tf.train.Example {image: 3,072
// bytes HWC, label: int64}. As binary: DIR/data_batch_i.bin.
absl::Status WriteSyntheticCifar10(const std::string& dir, int64_t count, int files, bool binary, uint64_t seed,
                                   const Progress& progress);

// `example`'s bytes with its features in name order: the same file from
// every run of one seed (a map's own order changes from process to process).
std::string ExampleBytes(const Example& example);

// The TFRecord file name of shard i of n.
std::string TfRecordShardName(int i, int n);
// Refused where `dir` holds TFRecord shards named so, or CIFAR binary
// batches, of an earlier run that a run writing `files` of them (binary
// batches or shards) would not replace (older_files.h).
absl::Status RefuseOlderShards(const std::string& dir, int files, bool binary);

}  // namespace sluice::datagen

#endif  // SLUICE_DATAGEN_SYNTHETIC_DATA_H_
