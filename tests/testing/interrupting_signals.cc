#include "interrupting_signals.h"

#include <signal.h>
#include <unistd.h>

namespace sluice::testing {
namespace {

void Ignore(int) {}

}  // namespace

InterruptingSignals::InterruptingSignals() : target_(pthread_self()) {
  struct sigaction action = {};
  action.sa_handler = Ignore;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART
  sigaction(SIGUSR1, &action, nullptr);
  sender_ = std::thread([this] {
    while (!stop_.load()) {
      pthread_kill(target_, SIGUSR1);
      sent_.fetch_add(1);
      usleep(500);
    }
  });
}

InterruptingSignals::~InterruptingSignals() {
  stop_ = true;
  sender_.join();
}

}  // namespace sluice::testing
