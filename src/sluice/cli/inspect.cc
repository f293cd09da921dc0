// sluice inspect FILE: print the records of a TFRecord, IDX or CIFAR-10
// binary file (the format is detected from the content).
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "example.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sluice/cli/command.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/cifar_source.h"
#include "sluice/io/crc32c.h"
#include "sluice/io/gzip_inflater.h"
#include "sluice/io/idx_file.h"
#include "sluice/io/object_store.h"
#include "sluice/io/random_access_file.h"
#include "sluice/io/tfrecord_reader.h"

namespace sluice::cli {
namespace {

struct InspectArgs {
  std::string file;
  int64_t limit = 5;
  bool json = false;
};

std::string DescribeFeature(const Feature& f) {
  switch (f.kind_case()) {
    case Feature::kBytesList: {
      std::vector<std::string> sizes;
      for (const std::string& v : f.bytes_list().value()) sizes.push_back(absl::StrCat(v.size()));
      return absl::StrCat("bytes x", f.bytes_list().value_size(), " (lengths ", absl::StrJoin(sizes, ","), ")");
    }
    case Feature::kFloatList: {
      const auto& v = f.float_list().value();
      return absl::StrCat("float32[", v.size(), "] ", absl::StrJoin(v.begin(), v.begin() + std::min(v.size(), 8), ","));
    }
    case Feature::kInt64List: {
      const auto& v = f.int64_list().value();
      return absl::StrCat("int64[", v.size(), "] ", absl::StrJoin(v.begin(), v.begin() + std::min(v.size(), 8), ","));
    }
    case Feature::KIND_NOT_SET:
      break;
  }
  return "empty";
}

absl::Status InspectTfRecord(const InspectArgs& args) {
  SLUICE_ASSIGN_OR_RETURN(auto reader, io::TfRecordReader::Open(args.file));
  int64_t index = 0;
  while (true) {
    const uint64_t offset = reader->offset();
    SLUICE_ASSIGN_OR_RETURN(std::optional<absl::string_view> record, reader->Next());
    if (!record) break;
    if (args.limit <= 0 || index < args.limit) {
      Example example;
      // protobuf parses messages of up to 2 GiB; a larger record is none.
      const bool fits = record->size() <= static_cast<size_t>(std::numeric_limits<int>::max());
      const bool parsed = fits && example.ParseFromArray(record->data(), static_cast<int>(record->size()));
      if (args.json) {
        std::string json;
        if (!parsed || !google::protobuf::util::MessageToJsonString(example, &json).ok()) {
          json = "null";
        }
        std::printf("{\"index\": %lld, \"offset\": %llu, \"length\": %zu, \"example\": %s}\n",
                    static_cast<long long>(index), static_cast<unsigned long long>(offset), record->size(),
                    json.c_str());
      } else {
        std::printf("record %lld @ offset %llu, %zu bytes%s\n", static_cast<long long>(index),
                    static_cast<unsigned long long>(offset), record->size(),
                    parsed ? ""
                    : fits ? " (not a tf.train.Example)"
                           : " (over 2 GiB: no tf.train.Example, which protobuf bounds at 2 GiB)");
        if (parsed) {
          std::map<std::string, const Feature*> sorted;
          for (const auto& [name, f] : example.features().feature()) sorted[name] = &f;
          for (const auto& [name, f] : sorted) {
            std::printf("  %s: %s\n", name.c_str(), DescribeFeature(*f).c_str());
          }
        }
      }
    }
    ++index;
  }
  std::fflush(stdout);
  std::fprintf(stderr, "%s: TFRecord, %lld records, all CRCs valid\n", args.file.c_str(),
               static_cast<long long>(index));
  return absl::OkStatus();
}

// One record's line: `json` as a JSON object, else `text` after its index.
void PrintRecord(const InspectArgs& args, int64_t i, const std::string& json, const std::string& text) {
  if (args.json) {
    std::printf("{\"index\": %lld, %s}\n", static_cast<long long>(i), json.c_str());
  } else {
    std::printf("  [%lld] %s\n", static_cast<long long>(i), text.c_str());
  }
}

// A rank-0 file holds one value: one record of one value.
absl::Status InspectIdx(const InspectArgs& args, const io::RandomAccessFile& file, int rank) {
  SLUICE_ASSIGN_OR_RETURN(io::IdxHeader header, io::ReadIdxHeader(file, rank));
  std::fprintf(args.json ? stderr : stdout, "%s: IDX uint8, shape [%s]\n", args.file.c_str(),
               absl::StrJoin(header.dims, ",").c_str());
  int64_t item = 1;
  for (int i = 1; i < rank; ++i) item *= header.dims[i];
  const int64_t records = rank == 0 ? 1 : header.dims[0];
  const int64_t n = args.limit <= 0 ? records : std::min(args.limit, records);
  std::vector<uint8_t> buf(item);
  for (int64_t i = 0; i < n; ++i) {
    SLUICE_RETURN_IF_ERROR(file.ReadExact(header.data_offset + i * item, item, buf.data()));
    if (rank <= 1) {
      PrintRecord(args, i, absl::StrCat("\"value\": ", buf[0]), absl::StrCat(buf[0]));
      continue;
    }
    int64_t sum = 0;
    uint8_t lo = 255, hi = 0;
    for (uint8_t v : buf) sum += v, lo = std::min(lo, v), hi = std::max(hi, v);
    const double mean = static_cast<double>(sum) / item;
    PrintRecord(args, i, absl::StrFormat("\"mean\": %.3f, \"min\": %d, \"max\": %d", mean, lo, hi),
                absl::StrFormat("mean %.1f min %d max %d", mean, lo, hi));
  }
  return absl::OkStatus();
}

absl::Status InspectCifar(const InspectArgs& args, const io::RandomAccessFile& file) {
  const int64_t records = file.size() / io::kCifarRecordBytes;
  std::fprintf(args.json ? stderr : stdout, "%s: CIFAR-10 binary, %lld records\n", args.file.c_str(),
               static_cast<long long>(records));
  const int64_t n = args.limit <= 0 ? records : std::min(args.limit, records);
  std::vector<uint8_t> rec(io::kCifarRecordBytes);
  for (int64_t i = 0; i < n; ++i) {
    SLUICE_RETURN_IF_ERROR(file.ReadExact(i * io::kCifarRecordBytes, rec.size(), rec.data()));
    double mean[3] = {0, 0, 0};
    for (int c = 0; c < 3; ++c) {
      for (int p = 0; p < 1024; ++p) mean[c] += rec[1 + c * 1024 + p];
      mean[c] /= 1024;
    }
    PrintRecord(args, i,
                absl::StrFormat("\"label\": %d, \"mean_rgb\": [%.3f, %.3f, %.3f]", rec[0], mean[0], mean[1], mean[2]),
                absl::StrFormat("label %d, mean RGB %.1f %.1f %.1f", rec[0], mean[0], mean[1], mean[2]));
  }
  return absl::OkStatus();
}

// A name that says TFRecord is read as one, whatever its first bytes: a
// damaged first header is reported as such, not taken for another format.
bool NamedTfRecord(const std::string& path) {
  return absl::StrContains(path, ".tfrecord") || absl::EndsWith(path, ".tfrec");
}

absl::Status Inspect(const InspectArgs& args) {
  // Looked up as a source lists it: a missing bucket is named as such.
  if (io::IsObjectUrl(args.file)) SLUICE_RETURN_IF_ERROR(io::ListObjects(args.file).status());
  SLUICE_ASSIGN_OR_RETURN(auto file, io::RandomAccessFile::Open(args.file));
  if (file->size() == 0) {
    std::printf("%s: empty (0 bytes): no records in any format\n", args.file.c_str());
    return absl::OkStatus();
  }
  uint8_t head[12] = {0};
  SLUICE_ASSIGN_OR_RETURN(size_t got, file->Read(0, sizeof(head), head));
  if (NamedTfRecord(args.file)) return InspectTfRecord(args);
  constexpr int kMostIdxRank = 8;  // what a rank past it is likely another format
  if (got >= 4 && head[0] == 0 && head[1] == 0 && head[2] == 0x08 && head[3] <= kMostIdxRank) {
    return InspectIdx(args, *file, head[3]);
  }
  uint32_t length_crc;
  std::memcpy(&length_crc, head + 8, 4);
  if (got == 12 && io::UnmaskCrc(length_crc) == io::Crc32c(head, 8)) return InspectTfRecord(args);
  const auto* start_bytes = reinterpret_cast<const char*>(head);
  if (io::IsGzip(start_bytes, got) || io::IsZlib(start_bytes, got)) {
    return InspectTfRecord(args);  // TensorFlow's GZIP or ZLIB
  }
  const absl::string_view start(reinterpret_cast<const char*>(head), got);
  if (absl::StartsWith(start, "PAR1") || absl::StartsWith(start, "ARROW1")) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.file, start[0] == 'P' ? " is a Parquet" : " is an Arrow IPC",
        " file: inspect prints TFRecord, IDX and CIFAR-10 records; a columnar file's schema is what "
        "`pipe.schema` of sluice.parquet(...) or sluice.arrow_ipc(...) says, and pyarrow shows its row groups"));
  }
  if (file->size() > 0 && file->size() % io::kCifarRecordBytes == 0) return InspectCifar(args, *file);
  return absl::InvalidArgumentError(
      absl::StrCat("cannot tell the format of ", args.file, ": not a TFRecord (",
                   got < 12 ? "shorter than a record's 12-byte header" : "the first record's length CRC does not match",
                   "), not IDX (no uint8 IDX magic) and not CIFAR-10 binary (size is not a multiple of 3073)"));
}

}  // namespace

void AddInspectCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print the records of a TFRecord, IDX or CIFAR-10 file");
  cmd->add_option("file", args->file, "the file")->required();
  cmd->add_option("--limit", args->limit, "records to print (0: all)")->default_val(5)->check(kNonNegative);
  cmd->add_flag("--json", args->json,
                "one JSON object per record (a TFRecord's Example in protobuf's JSON mapping; an IDX record's value "
                "or mean, min and max; a CIFAR-10 record's label and mean RGB), the summary on stderr");
  cmd->callback([args, result] { *result = Inspect(*args); });
}

}  // namespace sluice::cli
