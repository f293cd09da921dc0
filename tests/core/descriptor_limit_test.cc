#include "sluice/core/descriptor_limit.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(DescriptorLimitTest, RunningOutNamesTheLimitAndHowToRaiseIt) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit low = before;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> opened;
  int err = 0;
  while (err == 0 && opened.size() < 100) {  // at most 64 can be open
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) err = errno;
    if (fd >= 0) opened.push_back(fd);
  }
  const std::string hint = DescriptorLimitHint(err);  // as the limit stands when it was reached
  for (int fd : opened) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
  ASSERT_EQ(err, EMFILE);
  EXPECT_THAT(hint, HasSubstr("this process may open 64 descriptors (ulimit -n): raise the limit"));
  EXPECT_EQ(DescriptorLimitHint(ENOENT), "");
}

}  // namespace
}  // namespace sluice
