#include "sluice/service/autoscale.h"

#include "gtest/gtest.h"

namespace sluice::service {
namespace {

TEST(WorkersNeeded, ConsumersThatWaitAskForWorkersInProportion) {
  // 2 workers serve 10,000 samples/s; the consumers wait half their time:
  // they would take 20,000, which 4 such workers serve.
  EXPECT_EQ(WorkersNeeded({10000, 0.5, 2, 3}), 4);
  // Waiting a quarter of the time: 13,333/s, 2.67 workers' worth: 3.
  EXPECT_EQ(WorkersNeeded({10000, 0.25, 2, 1}), 3);
  // Never waiting: the workers it has.
  EXPECT_EQ(WorkersNeeded({10000, 0.0, 5, 1}), 5);
  // Rounding of the rates does not add a worker.
  EXPECT_EQ(WorkersNeeded({9999.99, 0.5000001, 3, 1}), 6);
}

TEST(WorkersNeeded, OnlyWaitingOrNothingMeasuredYet) {
  EXPECT_EQ(WorkersNeeded({10000, 1.0, 2, 1}), 40);  // the wait share counts as 0.95
  EXPECT_EQ(WorkersNeeded({0, 0.0, 0, 1}), 1);       // no worker yet: one to start with
  EXPECT_EQ(WorkersNeeded({0, 0.8, 3, 1}), 3);       // no rate measured yet: those it has
  EXPECT_EQ(WorkersNeeded({5000, 0.5, 2, 0}), 0);    // no consumer: none
}

}  // namespace
}  // namespace sluice::service
