// Done rows delivered out of order add up to done splits and done records;
// a resumed ledger starts from what was done.
#include "sluice/exec/delivery_ledger.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace sluice::exec {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// Two files of 10 records, 5 records a split: splits 0-1 of file 0, 2-3 of file 1.
std::shared_ptr<const std::vector<io::Split>> Order() {
  return std::make_shared<const std::vector<io::Split>>(io::MakeRecordSplits({10, 10}, 5));
}

// Provenance of `rows` rows from records first.. of `file`.
Provenance Rows(int32_t file, int64_t first) {
  Provenance p;
  p.AddRun(0, file, first);
  return p;
}

TEST(DeliveryLedger, ASplitIsDoneOnceEveryRowItHasIsDoneInAnyOrder) {
  DeliveryLedger ledger(Order(), {});
  ledger.SplitEnded(0, 5);
  SLUICE_ASSERT_OK(ledger.Done(Rows(0, 7), 0, 3));  // records 7-9 of split 1
  SLUICE_ASSERT_OK(ledger.Done(Rows(0, 0), 0, 5));  // all of split 0
  DoneRows done = ledger.Snapshot();
  EXPECT_EQ(done.splits_below, 1);
  EXPECT_TRUE(done.RecordDone(0, 8));
  EXPECT_FALSE(done.RecordDone(0, 5));
  ledger.SplitEnded(1, 5);
  SLUICE_ASSERT_OK(ledger.Done(Rows(0, 5), 0, 2));
  done = ledger.Snapshot();
  EXPECT_EQ(done.splits_below, 2);
  EXPECT_TRUE(done.SplitDone(1));
}

TEST(DeliveryLedger, ASplitAfterOneNotDoneIsListed) {
  DeliveryLedger ledger(Order(), {});
  ledger.SplitEnded(2, 5);
  SLUICE_ASSERT_OK(ledger.Done(Rows(1, 0), 0, 5));
  const DoneRows done = ledger.Snapshot();
  EXPECT_EQ(done.splits_below, 0);
  EXPECT_EQ(done.splits, (std::vector<int64_t>{2}));
  EXPECT_TRUE(done.SplitDone(2));
  EXPECT_FALSE(done.SplitDone(3));
}

TEST(DeliveryLedger, AResumedLedgerStartsFromWhatWasDone) {
  DoneRows start;
  start.splits_below = 1;
  start.records[0] = {{5, 7}};
  DeliveryLedger ledger(Order(), start);
  ledger.SplitEnded(1, 5);
  SLUICE_ASSERT_OK(ledger.Done(Rows(0, 7), 0, 3));
  EXPECT_EQ(ledger.Snapshot().splits_below, 2);
  EXPECT_EQ(start.DonePrefixEnd((*Order())[1]), 7);
}

TEST(DeliveryLedger, ARowOfNoSplitIsAnErrorNamingIt) {
  DeliveryLedger ledger(Order(), {});
  EXPECT_THAT(ledger.Done(Rows(5, 0), 0, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("none of the epoch's splits")));
  EXPECT_THAT(ledger.Done(Provenance(), 0, 1), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
}

}  // namespace
}  // namespace sluice::exec
