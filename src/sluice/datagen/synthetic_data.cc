#include "sluice/datagen/synthetic_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "example.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "sluice/core/rng.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/older_files.h"
#include "sluice/io/idx_file.h"
#include "sluice/io/random_access_file.h"
#include "sluice/io/staged_directory.h"
#include "sluice/io/tfrecord_writer.h"

namespace sluice::datagen {
namespace {

// A few thick anti-aliased strokes, so images look like handwriting to a
// blur, not like noise.
void DrawDigit(SampleRng& rng, uint8_t* img) {
  std::fill(img, img + 28 * 28, 0);
  const int strokes = 2 + static_cast<int>(rng.NextU32() % 3);
  for (int s = 0; s < strokes; ++s) {
    const float x0 = rng.Uniform(6, 22), y0 = rng.Uniform(4, 24);
    const float x1 = rng.Uniform(6, 22), y1 = rng.Uniform(4, 24);
    const float width = rng.Uniform(1.2f, 2.2f);
    for (int y = 0; y < 28; ++y) {
      for (int x = 0; x < 28; ++x) {
        const float dx = x1 - x0, dy = y1 - y0;
        const float len2 = dx * dx + dy * dy + 1e-6f;
        const float t = std::clamp(((x - x0) * dx + (y - y0) * dy) / len2, 0.f, 1.f);
        const float ex = x0 + t * dx - x, ey = y0 + t * dy - y;
        const float d = std::sqrt(ex * ex + ey * ey);
        const float v = std::clamp((width + 0.5f - d) * 255.f, 0.f, 255.f);
        img[y * 28 + x] = std::max<uint8_t>(img[y * 28 + x], static_cast<uint8_t>(v));
      }
    }
  }
}

// A smooth two-colour gradient with a soft blob: photo-like low frequencies.
void DrawCifar(SampleRng& rng, uint8_t* hwc) {
  float a[3], b[3], blob[3];
  for (int c = 0; c < 3; ++c) {
    a[c] = rng.Uniform(0, 255);
    b[c] = rng.Uniform(0, 255);
    blob[c] = rng.Uniform(0, 255);
  }
  const float angle = rng.Uniform(0, 6.2832f);
  const float bx = rng.Uniform(4, 28), by = rng.Uniform(4, 28), br = rng.Uniform(3, 10);
  const float ca = std::cos(angle), sa = std::sin(angle);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32; ++x) {
      const float t = std::clamp(0.5f + ((x - 16) * ca + (y - 16) * sa) / 32.f, 0.f, 1.f);
      const float d2 = ((x - bx) * (x - bx) + (y - by) * (y - by)) / (br * br);
      const float w = std::exp(-d2);
      for (int c = 0; c < 3; ++c) {
        const float noise = rng.Uniform(-6, 6);
        const float v = (a[c] * (1 - t) + b[c] * t) * (1 - w) + blob[c] * w + noise;
        hwc[(y * 32 + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.f, 255.f));
      }
    }
  }
}

// A file written from its start, closed when dropped.
using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

absl::StatusOr<FilePtr> CreateWithHeader(const std::string& path, const std::string& header) {
  FilePtr f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (f == nullptr) return io::ErrnoStatus(errno, "cannot create", path);
  if (std::fwrite(header.data(), 1, header.size(), f.get()) != header.size()) {
    return io::ErrnoStatus(errno, "cannot write", path);
  }
  return f;
}

absl::Status Append(std::FILE* f, const std::vector<uint8_t>& bytes, size_t n, const std::string& path) {
  if (std::fwrite(bytes.data(), 1, n, f) != n) return io::ErrnoStatus(errno, "cannot write", path);
  return absl::OkStatus();
}

// Streamed in chunks of images: a split of any size takes the memory of one.
absl::Status WriteMnistSplit(const std::string& images, const std::string& labels, int64_t count, uint64_t seed,
                             int64_t offset, int64_t total, const Progress& progress) {
  constexpr int64_t kChunk = 4096;
  SLUICE_ASSIGN_OR_RETURN(FilePtr image_file, CreateWithHeader(images, io::IdxHeaderBytes({count, 28, 28})));
  SLUICE_ASSIGN_OR_RETURN(FilePtr label_file, CreateWithHeader(labels, io::IdxHeaderBytes({count})));
  std::vector<uint8_t> pixels(kChunk * 28 * 28), label(kChunk);
  for (int64_t first = 0; first < count; first += kChunk) {
    const int64_t n = std::min(kChunk, count - first);
    for (int64_t i = 0; i < n; ++i) {
      SampleRng rng(seed, 1, 0, offset + first + i);
      label[i] = static_cast<uint8_t>(rng.NextU32() % 10);
      DrawDigit(rng, pixels.data() + i * 28 * 28);
    }
    SLUICE_RETURN_IF_ERROR(Append(image_file.get(), pixels, n * 28 * 28, images));
    SLUICE_RETURN_IF_ERROR(Append(label_file.get(), label, n, labels));
    if (progress) progress(offset + first + n, total);
  }
  for (auto [file, path] : {std::pair{&image_file, &images}, std::pair{&label_file, &labels}}) {
    if (std::fclose(file->release()) != 0) return io::ErrnoStatus(errno, "cannot write", *path);
  }
  return absl::OkStatus();
}

}  // namespace

MnistPaths MnistLayout(const std::string& dir) {
  const std::string raw = dir + "/MNIST/raw/";
  return {raw + "train-images-idx3-ubyte", raw + "train-labels-idx1-ubyte", raw + "t10k-images-idx3-ubyte",
          raw + "t10k-labels-idx1-ubyte"};
}

absl::Status WriteSyntheticMnist(const std::string& dir, int64_t count, uint64_t seed, const Progress& progress) {
  constexpr int64_t kMaxCount = 0xFFFFFFFF;  // an IDX file's dimensions are 32-bit
  if (count <= 0 || count > kMaxCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("--count must be from 1 to ", kMaxCount, " (an IDX file's most), got ", count));
  }
  const std::string raw = dir + "/MNIST/raw";
  SLUICE_RETURN_IF_ERROR(io::CreateDirectories(raw));
  // Written whole or not at all: a failed or stopped run leaves the files
  // before it, not a cut one.
  SLUICE_ASSIGN_OR_RETURN(io::StagedDirectory staged, io::StagedDirectory::Create(raw));
  const auto staging = [&](const std::string& path) {
    return staged.staging() + "/" + std::filesystem::path(path).filename().string();
  };
  const MnistPaths paths = MnistLayout(dir);
  const int64_t test = std::max<int64_t>(1, count / 6);
  SLUICE_RETURN_IF_ERROR(WriteMnistSplit(staging(paths.train_images), staging(paths.train_labels), count, seed, 0,
                                         count + test, progress));
  SLUICE_RETURN_IF_ERROR(WriteMnistSplit(staging(paths.test_images), staging(paths.test_labels), test, seed, count,
                                         count + test, progress));
  return staged.Commit(std::filesystem::path(paths.train_images).filename().string());
}

std::string ExampleBytes(const Example& example) {
  std::string bytes(example.ByteSizeLong(), '\0');  // sizes cached for the write below
  google::protobuf::io::ArrayOutputStream array(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedOutputStream coded(&array);
  coded.SetSerializationDeterministic(true);
  example.SerializeWithCachedSizes(&coded);
  return bytes;
}

std::string TfRecordShardName(int i, int n) { return absl::StrFormat("train-%05d-of-%05d.tfrecord", i, n); }

namespace {

// The shard's place in a file named as TfRecordShardName or as a CIFAR
// binary batch (data_batch_K.bin is shard K - 1 of any count), or nullopt.
struct ShardPlace {
  int index = 0, of = 0;  // of 0: a binary batch
};
std::optional<ShardPlace> ShardNamed(const std::string& name) {
  ShardPlace place;
  int end = 0;
  if (std::sscanf(name.c_str(), "train-%d-of-%d.tfrecord%n", &place.index, &place.of, &end) == 2 &&
      static_cast<size_t>(end) == name.size() && name == TfRecordShardName(place.index, place.of)) {
    return place;
  }
  int k = 0;
  end = 0;
  if (std::sscanf(name.c_str(), "data_batch_%d.bin%n", &k, &end) == 1 && static_cast<size_t>(end) == name.size() &&
      name == absl::StrCat("data_batch_", k, ".bin") && k >= 1) {
    return ShardPlace{k - 1, 0};
  }
  return std::nullopt;
}

}  // namespace

absl::Status RefuseOlderShards(const std::string& dir, int files, bool binary) {
  return RefuseOlderFiles(
      dir, [](const std::string& name) { return ShardNamed(name).has_value(); },
      [&](const std::string& name) {
        const std::optional<ShardPlace> place = ShardNamed(name);
        return place->index < files && place->of == (binary ? 0 : files);
      });
}

absl::Status WriteSyntheticCifar10(const std::string& dir, int64_t count, int files, bool binary, uint64_t seed,
                                   const Progress& progress) {
  if (count <= 0) return absl::InvalidArgumentError("--count must be > 0");
  if (files <= 0) return absl::InvalidArgumentError("--files must be > 0");
  SLUICE_RETURN_IF_ERROR(RefuseOlderShards(dir, files, binary));
  SLUICE_RETURN_IF_ERROR(io::CreateDirectories(dir));
  // Written whole or not at all: a failed or stopped run leaves the files
  // before it, not a mix of its own (or a cut one) and theirs.
  SLUICE_ASSIGN_OR_RETURN(io::StagedDirectory staged, io::StagedDirectory::Create(dir));
  std::vector<uint8_t> hwc(32 * 32 * 3);
  int64_t done = 0;
  for (int f = 0; f < files; ++f) {
    const int64_t n = count / files + (f < count % files ? 1 : 0);
    std::unique_ptr<io::TfRecordWriter> writer;
    std::FILE* bin = nullptr;
    const std::string name = binary ? absl::StrCat("data_batch_", f + 1, ".bin") : TfRecordShardName(f, files);
    const std::string path = absl::StrCat(staged.staging(), "/", name);
    if (binary) {
      bin = std::fopen(path.c_str(), "wb");
      if (bin == nullptr) return io::ErrnoStatus(errno, "cannot create", path);
    } else {
      SLUICE_ASSIGN_OR_RETURN(writer, io::TfRecordWriter::Create(path));
    }
    Example example;
    auto& features = *example.mutable_features()->mutable_feature();
    std::string planar(1 + 3072, '\0');
    for (int64_t i = 0; i < n; ++i, ++done) {
      SampleRng rng(seed, 2, 0, done);
      const int64_t label = rng.NextU32() % 10;
      DrawCifar(rng, hwc.data());
      if (binary) {  // label byte, then R, G, B planes
        planar[0] = static_cast<char>(label);
        for (int p = 0; p < 1024; ++p) {
          for (int c = 0; c < 3; ++c) planar[1 + c * 1024 + p] = static_cast<char>(hwc[p * 3 + c]);
        }
        if (std::fwrite(planar.data(), 1, planar.size(), bin) != planar.size()) {
          std::fclose(bin);
          return io::ErrnoStatus(errno, "cannot write", path);
        }
      } else {
        features["image"].mutable_bytes_list()->Clear();
        features["image"].mutable_bytes_list()->add_value(
            std::string(reinterpret_cast<const char*>(hwc.data()), hwc.size()));
        features["label"].mutable_int64_list()->Clear();
        features["label"].mutable_int64_list()->add_value(label);
        SLUICE_RETURN_IF_ERROR(writer->Write(ExampleBytes(example)));
      }
      if (progress && (done + 1) % 5000 == 0) progress(done + 1, count);
    }
    if (binary) {
      if (std::fclose(bin) != 0) return io::ErrnoStatus(errno, "cannot write", path);
    } else {
      SLUICE_RETURN_IF_ERROR(writer->Close());
    }
  }
  SLUICE_RETURN_IF_ERROR(staged.Commit(binary ? "data_batch_1.bin" : TfRecordShardName(0, files)));
  if (progress) progress(count, count);
  return absl::OkStatus();
}

}  // namespace sluice::datagen
