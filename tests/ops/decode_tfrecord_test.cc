// Encoded images stored in tf.train.Example records: a bytes feature of any
// length, read as views into the records and decoded as files are.
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "example.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/synthetic_data.h"
#include "sluice/datagen/synthetic_images.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/io/tfrecord_writer.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int kCount = 12;
constexpr int kClasses = 3;
constexpr uint64_t kSeed = 7;

// Every row of every batch, column by column: (column name, row bytes).
using Rows = std::vector<std::pair<std::string, std::string>>;

absl::StatusOr<Rows> RunJson(const std::string& json) {
  SLUICE_ASSIGN_OR_RETURN(PipelineDef def, graph::PipelineFromJson(json));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  const Schema schema = pipeline->output_schema();
  auto it = pipeline->Iterate();
  Rows rows;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
    if (end) break;
    for (int64_t r = 0; r < b.rows; ++r) {
      for (size_t c = 0; c < b.columns.size(); ++c) {
        const Column& col = b.columns[c];
        std::string bytes;
        if (col.ragged()) {
          bytes = std::string(col.RaggedRow(r));
        } else {
          const int64_t row_bytes = col.values.byte_size() / b.rows;
          bytes.assign(reinterpret_cast<const char*>(col.values.raw_data()) + r * row_bytes, row_bytes);
        }
        rows.emplace_back(schema.column(static_cast<int>(c)).name, std::move(bytes));
      }
    }
  }
  return rows;
}

class DecodeTfRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_ASSERT_OK(datagen::WriteSyntheticImageTfRecords(dir_.Join("shards"), kCount, kClasses, 2, kSeed,
                                                           [](int64_t, int64_t) {}));
  }

  // A tfrecord source over `files` declaring the encoded image (any length)
  // and the label, then `rest` (JSON nodes after the source).
  static std::string Pipeline(const std::string& files, const std::string& rest) {
    return absl::StrCat(R"({"nodes": [{"source": {"tfrecord": {"files": [")", files,
                        R"("], "features": [{"name": "image/encoded", "dtype": "bytes"},
                                          {"name": "image/class/label", "dtype": "int64"}]}}})",
                        rest, "]}");
  }

  std::string Shards() const { return dir_.Join("shards/*.tfrecord"); }

  // One record per call, with the features given.
  std::string WriteRecords(const std::string& name, const std::vector<Example>& examples) {
    const std::string path = dir_.Join(name);
    auto writer = io::TfRecordWriter::Create(path);
    EXPECT_TRUE(writer.ok());
    for (const Example& e : examples) SLUICE_EXPECT_OK((*writer)->Write(e.SerializeAsString()));
    SLUICE_EXPECT_OK((*writer)->Close());
    return path;
  }

  testing::TempDir dir_;
};

TEST_F(DecodeTfRecordTest, ImagesInRecordsDecodeAsTheSameFilesDo) {
  // The same images as files, in the same order, through a file list.
  std::string list;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_OK_AND_ASSIGN(datagen::SyntheticImageFile f, datagen::MakeSyntheticImageFile(i, kClasses, kSeed));
    const std::string path = dir_.Join(absl::StrCat("img", i, ".", f.ext));
    testing::WriteFileBytes(path, f.bytes);
    absl::StrAppend(&list, path, " ", f.label, "\n");
  }
  testing::WriteFileBytes(dir_.Join("list.txt"), list);
  const std::string decode =
      R"({"map": {"ops": [{"op": "decode_image", "attrs": {"field": "image/encoded", "size": [48, 64]}}]}},
         {"batch": {"size": 5}})";
  ASSERT_OK_AND_ASSIGN(Rows records, RunJson(Pipeline(Shards(), absl::StrCat(",", decode))));
  ASSERT_OK_AND_ASSIGN(
      Rows files, RunJson(absl::StrCat(R"({"nodes": [{"source": {"file_list": {"path": ")", dir_.Join("list.txt"),
                                       R"("}}}, {"map": {"ops": [{"op": "decode_image", "attrs": {"size": [48, 64]}}]}},
                                          {"batch": {"size": 5}}]})")));
  ASSERT_EQ(records.size(), 2u * kCount);
  ASSERT_EQ(files.size(), 2u * kCount);
  for (int i = 0; i < kCount; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(records[2 * i].first, "image/encoded");
    EXPECT_EQ(records[2 * i].second.size(), 48u * 64 * 3);
    EXPECT_TRUE(records[2 * i].second == files[2 * i].second) << "pixels differ";
    int64_t label;
    std::memcpy(&label, records[2 * i + 1].second.data(), 8);
    EXPECT_EQ(label, i % kClasses);
  }
}

TEST_F(DecodeTfRecordTest, UndecodedBytesComeOutWhole) {
  // Parsing in a map of its own (a take follows the source): the feature
  // leaves the map as a ragged column, gathered out of the records.
  ASSERT_OK_AND_ASSIGN(Rows rows, RunJson(Pipeline(Shards(), R"(, {"take": {"count": 4}})")));
  ASSERT_EQ(rows.size(), 8u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(datagen::SyntheticImageFile f, datagen::MakeSyntheticImageFile(i, kClasses, kSeed));
    EXPECT_EQ(rows[2 * i].first, "image/encoded");
    EXPECT_TRUE(rows[2 * i].second == f.bytes) << "record " << i;
  }
}

TEST_F(DecodeTfRecordTest, ACorruptImageInARecordNamesTheRecordAndFile) {
  Example good, bad;
  ASSERT_OK_AND_ASSIGN(datagen::SyntheticImageFile f, datagen::MakeSyntheticImageFile(0, kClasses, kSeed));
  auto& gf = *good.mutable_features()->mutable_feature();
  gf["image/encoded"].mutable_bytes_list()->add_value(f.bytes);
  gf["image/class/label"].mutable_int64_list()->add_value(1);
  bad = good;
  (*bad.mutable_features()->mutable_feature())["image/encoded"].mutable_bytes_list()->set_value(
      0, f.bytes.substr(0, f.bytes.size() / 3));
  const std::string path = WriteRecords("bad.tfrecord", {good, bad});
  EXPECT_THAT(RunJson(Pipeline(path, R"(, {"map": {"ops": [{"op": "decode_image",
                                          "attrs": {"field": "image/encoded", "size": [32]}}]}})")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("record 1 of " + path + ": truncated JPEG (no end-of-image marker)")));
}

TEST_F(DecodeTfRecordTest, AMissingOrRepeatedImageFeatureIsNamed) {
  Example missing, twice;
  (*missing.mutable_features()->mutable_feature())["image/class/label"].mutable_int64_list()->add_value(1);
  twice = missing;
  auto& values = *(*twice.mutable_features()->mutable_feature())["image/encoded"].mutable_bytes_list();
  values.add_value("a");
  values.add_value("b");
  const std::string decode =
      R"(, {"map": {"ops": [{"op": "decode_image", "attrs": {"field": "image/encoded", "size": [32]}}]}})";
  const std::string a = WriteRecords("missing.tfrecord", {missing});
  EXPECT_THAT(
      RunJson(Pipeline(a, decode)),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("record 0 of " + a + ": feature 'image/encoded' missing")));
  const std::string b = WriteRecords("twice.tfrecord", {twice});
  EXPECT_THAT(RunJson(Pipeline(b, decode)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("feature 'image/encoded': expected 1 bytes value, got 2")));
}

TEST_F(DecodeTfRecordTest, UndecodedBytesBatchAsTheirRowsAndDecodeAfterwardsAsBefore) {
  // A batch of bytes holds each row's bytes as they are (a GPU decoder
  // takes them so); the last batch is partial.
  ASSERT_OK_AND_ASSIGN(Rows rows, RunJson(Pipeline(Shards(), "")));
  ASSERT_OK_AND_ASSIGN(Rows batched, RunJson(Pipeline(Shards(), R"(, {"batch": {"size": 5}})")));
  ASSERT_EQ(rows.size(), 2u * kCount);
  EXPECT_EQ(batched, rows);
  const std::string decode = R"({"map": {"ops": [{"op": "decode_image",
                                  "attrs": {"field": "image/encoded", "size": [48, 64]}}]}})";
  ASSERT_OK_AND_ASSIGN(Rows decoded_first,
                       RunJson(Pipeline(Shards(), absl::StrCat(",", decode, R"(, {"batch": {"size": 5}})"))));
  ASSERT_OK_AND_ASSIGN(Rows batched_first,
                       RunJson(Pipeline(Shards(), absl::StrCat(R"(, {"batch": {"size": 5}}, )", decode))));
  ASSERT_EQ(decoded_first.size(), 2u * kCount);
  EXPECT_EQ(batched_first, decoded_first);
}

}  // namespace
}  // namespace sluice::ops
