#include "sluice/core/wait_child.h"

#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "interrupting_signals.h"

namespace sluice {
namespace {

TEST(WaitChildTest, SignalsWhileWaitingDoNotLoseTheChildOrItsStatus) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // exits when the parent closes its end, once the signals have begun
    char byte;
    close(ready[1]);
    while (read(ready[0], &byte, 1) > 0) {
    }
    _exit(7);
  }
  close(ready[0]);
  int status = -1;
  pid_t waited = -1;
  {
    testing::InterruptingSignals signals;
    std::thread release([&] {
      while (signals.sent() < 200) usleep(100);
      close(ready[1]);
    });
    waited = WaitChild(child, &status, 0);
    release.join();
    EXPECT_GE(signals.sent(), 200);  // it was interrupted, and waited on
  }
  ASSERT_EQ(waited, child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

}  // namespace
}  // namespace sluice
