#include "sluice/core/environment_number.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(EnvironmentNumber, UnsetIsTheFallbackSilently) {
  unsetenv("SLUICE_TEST_UNSET");
  testing::internal::CaptureStderr();
  EXPECT_EQ(IntFromEnvironment("SLUICE_TEST_UNSET", 7, 1), 7);
  EXPECT_EQ(DoubleFromEnvironment("SLUICE_TEST_UNSET", 2.5, 0), 2.5);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
}

TEST(EnvironmentNumber, AValidValueIsTaken) {
  setenv("SLUICE_TEST_INT", "16", 1);
  setenv("SLUICE_TEST_DOUBLE", "0.5", 1);
  EXPECT_EQ(IntFromEnvironment("SLUICE_TEST_INT", 4, 1), 16);
  EXPECT_EQ(DoubleFromEnvironment("SLUICE_TEST_DOUBLE", 60, 0), 0.5);
}

TEST(EnvironmentNumber, ABadValueIsTheFallbackAndSaidOnce) {
  setenv("SLUICE_TEST_TYPO", "16MiB", 1);
  setenv("SLUICE_TEST_LOW", "-1", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(IntFromEnvironment("SLUICE_TEST_TYPO", 4, 1), 4);
  EXPECT_EQ(IntFromEnvironment("SLUICE_TEST_TYPO", 4, 1), 4);
  EXPECT_EQ(DoubleFromEnvironment("SLUICE_TEST_LOW", 60, 0), 60);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("sluice: SLUICE_TEST_TYPO=\"16MiB\" ignored: not a number >= 1; using 4\n"));
  EXPECT_THAT(said, HasSubstr("SLUICE_TEST_LOW=\"-1\" ignored: not a number >= 0; using 60"));
  EXPECT_EQ(said.find("SLUICE_TEST_TYPO"), said.rfind("SLUICE_TEST_TYPO"));  // once
}

}  // namespace
}  // namespace sluice
