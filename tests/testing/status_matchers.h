// Status assertions for GoogleTest (googletest 1.12 ships none), after
// Arrow's testing/gtest_util.h.
#ifndef SLUICE_TESTS_TESTING_STATUS_MATCHERS_H_
#define SLUICE_TESTS_TESTING_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER_P2(StatusIs, code, message_matcher, absl::StrCat("has code ", absl::StatusCodeToString(code))) {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code && ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

}  // namespace sluice::testing

#define SLUICE_ASSERT_OK(expr)                                                   \
  do {                                                                           \
    const absl::Status sluice_s_ = ::sluice::testing::GetStatus(expr);           \
    ASSERT_TRUE(sluice_s_.ok()) << #expr << " failed: " << sluice_s_.ToString(); \
  } while (0)

#define SLUICE_EXPECT_OK(expr)                                                   \
  do {                                                                           \
    const absl::Status sluice_s_ = ::sluice::testing::GetStatus(expr);           \
    EXPECT_TRUE(sluice_s_.ok()) << #expr << " failed: " << sluice_s_.ToString(); \
  } while (0)

#define SLUICE_TEST_CONCAT_INNER_(a, b) a##b
#define SLUICE_TEST_CONCAT_(a, b) SLUICE_TEST_CONCAT_INNER_(a, b)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                                         \
  auto SLUICE_TEST_CONCAT_(sluice_or_, __LINE__) = (expr);                                      \
  ASSERT_TRUE(SLUICE_TEST_CONCAT_(sluice_or_, __LINE__).ok())                                   \
      << #expr << " failed: " << SLUICE_TEST_CONCAT_(sluice_or_, __LINE__).status().ToString(); \
  lhs = std::move(SLUICE_TEST_CONCAT_(sluice_or_, __LINE__)).value()

#endif  // SLUICE_TESTS_TESTING_STATUS_MATCHERS_H_
