#include "sluice/core/wait_child.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace sluice {
namespace {

void Ignore(int) {}

// A handler installed without SA_RESTART, as Python installs the trainer's
// SIGCHLD handler: each signal makes a blocked waitpid return EINTR.
void InstallInterruptingHandler() {
  struct sigaction action = {};
  action.sa_handler = Ignore;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  ASSERT_EQ(sigaction(SIGUSR1, &action, nullptr), 0);
}

TEST(WaitChildTest, SignalsWhileWaitingDoNotLoseTheChildOrItsStatus) {
  InstallInterruptingHandler();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // exits when the parent closes its end, after the signals began
    char byte;
    close(ready[1]);
    while (read(ready[0], &byte, 1) > 0) {
    }
    _exit(7);
  }
  close(ready[0]);
  const pthread_t waiter = pthread_self();
  std::atomic<int> sent{0};
  std::atomic<bool> done{false};
  std::thread signaller([&] {
    while (!done.load()) {
      pthread_kill(waiter, SIGUSR1);
      if (sent.fetch_add(1) == 200) close(ready[1]);  // the child may go now
      usleep(500);
    }
  });
  int status = -1;
  const pid_t waited = WaitChild(child, &status, 0);
  done = true;
  signaller.join();
  ASSERT_EQ(waited, child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_GT(sent.load(), 200);  // it was interrupted, and waited on
}

}  // namespace
}  // namespace sluice
