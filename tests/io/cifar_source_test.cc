#include "sluice/io/cifar_source.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

TEST(Cifar10Source, ConvertsPlanarRecordsToHwc) {
  testing::TempDir dir;
  std::string data;
  for (int r = 0; r < 3; ++r) {
    data.push_back(static_cast<char>(r + 1));  // label
    for (int c = 0; c < 3; ++c) {
      for (int p = 0; p < 1024; ++p) data.push_back(static_cast<char>((p + 50 * c + r) % 256));
    }
  }
  testing::WriteFileBytes(dir.Join("data_batch_1.bin"), data);
  ASSERT_OK_AND_ASSIGN(auto source, MakeCifar10Source({dir.Join("*.bin")}));
  ASSERT_OK_AND_ASSIGN(auto reader, source->OpenSplit(source->MakeSplits()[0], nullptr));
  BatchBuilder out(source->schema(), 3);
  ASSERT_OK_AND_ASSIGN(int64_t n, reader->Read(3, &out));
  ASSERT_EQ(n, 3);
  Batch b = out.Finish();
  const uint8_t* img = b.columns[0].values.data<uint8_t>() + 2 * 3072;  // record 2
  const int p = 33;                                                     // row 1, column 1
  EXPECT_EQ(img[3 * p + 0], (p + 2) % 256);
  EXPECT_EQ(img[3 * p + 1], (p + 50 + 2) % 256);
  EXPECT_EQ(img[3 * p + 2], (p + 100 + 2) % 256);
  EXPECT_EQ(b.columns[1].values.data<int64_t>()[2], 3);
}

TEST(Cifar10Source, WrongSizeIsDataLossNamingTheFile) {
  testing::TempDir dir;
  testing::WriteFileBytes(dir.Join("data_batch_1.bin"), std::string(3073 * 2 + 5, 'x'));
  EXPECT_THAT(
      MakeCifar10Source({dir.Join("data_batch_1.bin")}),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a CIFAR-10 binary file: " + dir.Join("data_batch_1.bin"))));
}

}  // namespace
}  // namespace sluice::io
