#include "sluice/service/security.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

class SecurityTest : public ::testing::Test {
 protected:
  std::string File(const std::string& bytes) {
    const std::string path = dir_.Join("f" + std::to_string(files_++));
    sluice::testing::WriteFileBytes(path, bytes);
    return path;
  }

  sluice::testing::TempDir dir_;
  int files_ = 0;
  SecurityOptions options_;
};

// gRPC aborted the process on a token it cannot send, after logging it.
TEST_F(SecurityTest, ATokenGRpcCannotSendIsRefusedWithoutShowingIt) {
  for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
           {"my-secret-token\nrotated-2026-12\n", "a line break at character 16"},
           {"my-secret\ttoken", "a tab at character 10"},
           {"my-secret-t\xc3\xb6ken", "a byte of non-ASCII text at character 12"}}) {
    const std::string path = File(text);
    const absl::Status read = options_.ReadTokenFile(path);
    EXPECT_THAT(read, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("token file " + path + ": the token holds " + what +
                                         "; a token is one line of printable ASCII")));
    EXPECT_THAT(read.message(), Not(HasSubstr("secret")));
  }
  SLUICE_EXPECT_OK(options_.ReadTokenFile(File("  a token with spaces, then a newline\n")));
  EXPECT_EQ(options_.token, "a token with spaces, then a newline");
}

// A '#' within a token cut it to what came before: its holder was refused
// and anyone knowing that prefix was let in.
TEST_F(SecurityTest, ACallersTokenKeepsItsHashAndACommentFollowsASpace) {
  SLUICE_ASSERT_OK(
      options_.ReadCallersFile(File("# role name token\n"
                                    "worker fleet wtok-1111\n"
                                    "client carol c4rol#Xq9-long   # carol's\n")));
  ASSERT_EQ(options_.callers.size(), 2u);
  EXPECT_EQ(options_.callers[1].token, "c4rol#Xq9-long");
  const std::string bad = File("client dave d\x01ve\n");
  EXPECT_THAT(options_.ReadCallersFile(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(bad + ":1: the token holds a control character")));
}

}  // namespace
}  // namespace sluice::service
