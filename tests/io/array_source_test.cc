#include "sluice/io/array_source.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

template <typename T>
ArrayColumnData Column(const std::string& name, DType dtype, Shape shape, std::vector<T> values) {
  ArrayColumnData c;
  c.spec = ColumnSpec{name, dtype, shape};
  c.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  return c;
}

TEST(ArraySource, SplitsRowsIntoRangesAndCopiesThem) {
  std::vector<ArrayColumnData> columns;
  columns.push_back(Column<float>("x", DType::kFloat32, Shape{2}, {0, 1, 10, 11, 20, 21, 30, 31, 40, 41}));
  columns.push_back(Column<int64_t>("y", DType::kInt64, Shape{}, {0, 1, 2, 3, 4}));
  ASSERT_OK_AND_ASSIGN(auto source, MakeArraySource(std::move(columns), /*split_records=*/2));
  std::vector<Split> splits = source->MakeSplits();
  ASSERT_EQ(splits.size(), 3u);
  EXPECT_EQ(splits[1].begin_record, 2);
  EXPECT_EQ(splits[2].end_record, 5);

  ASSERT_OK_AND_ASSIGN(auto reader, source->OpenSplit(splits[1], nullptr));
  BatchBuilder out(source->schema(), 4);
  ASSERT_OK_AND_ASSIGN(int64_t n, reader->Read(4, &out));
  ASSERT_EQ(n, 2);
  ASSERT_OK_AND_ASSIGN(n, reader->Read(4, &out));
  EXPECT_EQ(n, 0);
  Batch b = out.Finish();
  const float* x = b.columns[0].values.data<float>();
  EXPECT_EQ(x[0], 20);
  EXPECT_EQ(x[3], 31);
  EXPECT_EQ(b.columns[1].values.data<int64_t>()[1], 3);
  EXPECT_EQ(b.provenance.Origin(1).record, 3);
}

TEST(ArraySource, ViewsRowsWithoutCopyingAndOutlivesTheSource) {
  std::vector<ArrayColumnData> columns;
  columns.push_back(Column<float>("x", DType::kFloat32, Shape{2}, {0, 1, 10, 11, 20, 21, 30, 31, 40, 41}));
  ASSERT_OK_AND_ASSIGN(auto source, MakeArraySource(std::move(columns), /*split_records=*/3));
  ASSERT_OK_AND_ASSIGN(auto reader, source->OpenSplit(source->MakeSplits()[1], nullptr));
  ASSERT_TRUE(reader->views());
  Batch b;
  b.provenance = Provenance(source->files());
  ASSERT_OK_AND_ASSIGN(int64_t n, reader->View(4, &b));
  ASSERT_EQ(n, 2);  // the split holds rows 3 and 4
  Batch rest;
  ASSERT_OK_AND_ASSIGN(n, reader->View(4, &rest));
  EXPECT_EQ(n, 0);
  reader.reset();
  source.reset();  // the batch keeps the arrays alive
  EXPECT_EQ(b.rows, 2);
  EXPECT_EQ(b.columns[0].values.shape(), (Shape{2, 2}));
  EXPECT_EQ(b.columns[0].values.data<float>()[0], 30);
  EXPECT_EQ(b.columns[0].values.data<float>()[3], 41);
  EXPECT_EQ(b.provenance.Origin(1).record, 4);
}

TEST(ArraySource, RaggedBytesAndRowCountMismatchNameTheColumn) {
  std::vector<ArrayColumnData> ragged;
  ragged.push_back(Column<float>("x", DType::kFloat32, Shape{2}, {0, 1, 2}));
  EXPECT_THAT(
      MakeArraySource(std::move(ragged)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("arrays column 'x': 12 bytes is not a whole number of")));

  std::vector<ArrayColumnData> mismatch;
  mismatch.push_back(Column<float>("x", DType::kFloat32, Shape{}, {0, 1, 2}));
  mismatch.push_back(Column<int64_t>("y", DType::kInt64, Shape{}, {0, 1}));
  EXPECT_THAT(
      MakeArraySource(std::move(mismatch)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("arrays column 'y': 2 rows, but column 'x' has 3")));
}

}  // namespace
}  // namespace sluice::io
