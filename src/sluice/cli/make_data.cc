// sluice make-data mnist|cifar10|imagenet --out DIR: synthetic data in real formats.
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sluice/cli/command.h"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/synthetic_data.h"
#include "sluice/datagen/synthetic_images.h"

namespace sluice::cli {
namespace {

struct MakeDataArgs {
  std::string dataset;
  std::string out;
  int64_t count = 0;
  int files = 8;
  int classes = 10;
  std::string format;  // empty: the dataset's usual one
  uint64_t seed = 1;
  bool files_given = false, classes_given = false;
};

// An option the dataset takes no notice of is refused, not dropped.
absl::Status CheckOptionsApply(const MakeDataArgs& args) {
  const bool many_files = args.dataset == "cifar10" || (args.dataset == "imagenet" && args.format == "tfrecord");
  if (args.files_given && !many_files) {
    return absl::InvalidArgumentError(
        absl::StrCat("--files applies to cifar10 and to imagenet with --format tfrecord, not to ", args.dataset,
                     args.dataset == "imagenet" ? " as class folders" : ""));
  }
  if (args.classes_given && args.dataset != "imagenet") {
    return absl::InvalidArgumentError(
        absl::StrCat("--classes applies to imagenet, not to ", args.dataset, " (its 10 classes are fixed)"));
  }
  return absl::OkStatus();
}

absl::Status MakeData(const MakeDataArgs& args) {
  SLUICE_RETURN_IF_ERROR(CheckOptionsApply(args));
  ProgressLine progress(true);
  auto report = [&](int64_t done, int64_t total) {
    progress.Update(
        [&] { return absl::StrFormat("%s: %s / %s samples", args.dataset, WithCommas(done), WithCommas(total)); });
  };
  absl::Status s;
  // No empty files: fewer samples than files make one file per sample.
  const auto files_for = [&](int64_t count) { return static_cast<int>(std::min<int64_t>(args.files, count)); };
  if (args.dataset == "imagenet") {
    const int64_t count = args.count > 0 ? args.count : 2000;
    if (args.format != "" && args.format != "folder" && args.format != "tfrecord") {
      return absl::InvalidArgumentError(absl::StrCat("--format must be folder or tfrecord, got ", args.format));
    }
    if (args.format == "tfrecord") {
      s = datagen::WriteSyntheticImageTfRecords(args.out, count, args.classes, files_for(count), args.seed, report);
      if (s.ok()) {
        std::printf("wrote %lld JPEG/PNG images as tf.train.Example in %d TFRecord files under %s\n",
                    static_cast<long long>(count), files_for(count), args.out.c_str());
      }
    } else {
      s = datagen::WriteSyntheticImageFolder(args.out, count, args.classes, args.seed, report);
      if (s.ok()) {
        std::printf("wrote %lld JPEG/PNG images in %lld class folders under %s\n", static_cast<long long>(count),
                    static_cast<long long>(std::min<int64_t>(args.classes, count)), args.out.c_str());
      }
    }
  } else if (args.dataset == "mnist") {
    if (!args.format.empty() && args.format != "idx") {
      return absl::InvalidArgumentError(
          absl::StrCat("--format for mnist must be idx (its only one), got ", args.format));
    }
    const int64_t count = args.count > 0 ? args.count : 60000;
    s = datagen::WriteSyntheticMnist(args.out, count, args.seed, report);
    if (s.ok())
      std::printf("wrote %lld MNIST samples (+ test split) under %s/MNIST/raw\n", static_cast<long long>(count),
                  args.out.c_str());
  } else {
    const int64_t count = args.count > 0 ? args.count : 50000;
    const bool binary = args.format == "bin";
    if (!binary && args.format != "tfrecord" && !args.format.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--format must be tfrecord or bin, got ", args.format));
    }
    s = datagen::WriteSyntheticCifar10(args.out, count, files_for(count), binary, args.seed, report);
    if (s.ok()) {
      std::printf("wrote %lld CIFAR-10 samples in %d %s files under %s\n", static_cast<long long>(count),
                  files_for(count), binary ? "binary" : "TFRecord", args.out.c_str());
    }
  }
  progress.Finish();
  return s;
}

}  // namespace

void AddMakeDataCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<MakeDataArgs>();
  CLI::App* cmd = app.add_subcommand(
      "make-data", "Write a synthetic dataset in its real on-disk format (IDX, TFRecord, CIFAR binary)");
  cmd->add_option("dataset", args->dataset, "mnist, cifar10 or imagenet (class folders of ~500x375 JPEGs)")
      ->required()
      ->check(CLI::IsMember({"mnist", "cifar10", "imagenet"}));
  cmd->add_option("--out", args->out, "output directory")->required()->check(kNonEmpty);
  cmd->add_option("--count", args->count, "samples (default: 60000 for mnist, 50000 for cifar10, 2000 for imagenet)")
      ->check(kPositive);
  CLI::Option* classes =
      cmd->add_option("--classes", args->classes, "imagenet: class folders")->default_val(10)->check(kPositive);
  CLI::Option* files = cmd->add_option("--files", args->files, "cifar10, imagenet as tfrecord: number of files")
                           ->default_val(8)
                           ->check(kPositive);
  cmd->add_option("--format", args->format,
                  "cifar10: tfrecord (W2, the default) or bin (CIFAR-10 binary); imagenet: folder (class "
                  "folders, the default) or tfrecord (tf.train.Example with image/encoded, "
                  "image/class/label); mnist: idx (the only one)");
  cmd->add_option("--seed", args->seed, "generator seed")->default_val(1)->check(kSeed);
  cmd->callback([args, result, classes, files] {
    args->classes_given = classes->count() > 0;
    args->files_given = files->count() > 0;
    *result = MakeData(*args);
  });
}

}  // namespace sluice::cli
