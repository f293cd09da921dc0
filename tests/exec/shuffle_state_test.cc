// A shuffle's position replays to the buffer a real shuffle holds; held rows
// and the marks of emitted rows follow what was released and taken.
#include "sluice/exec/shuffle_state.h"

#include <vector>

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

// A shuffle buffer of `size` rows run for `draws` draws over an endless
// input: each draw emits a slot's row and refills the slot with the next.
ShuffleReplay Simulate(uint64_t seed, uint64_t key, uint64_t epoch, int64_t size, int64_t draws,
                       std::vector<int64_t>* emitted) {
  ShuffleReplay buffer;
  for (int64_t i = 0; i < size; ++i) buffer.slots.push_back(buffer.next++);
  for (int64_t d = 0; d < draws; ++d) {
    const size_t slot = ShuffleDraw(seed, key, epoch, d, buffer.slots.size());
    emitted->push_back(buffer.slots[slot]);
    buffer.slots[slot] = buffer.next++;
  }
  return buffer;
}

TEST(ShuffleState, ReplayGivesTheBufferTheDrawsLeft) {
  for (int64_t draws : {0, 1, 7, 40}) {
    std::vector<int64_t> emitted;
    const ShuffleReplay want = Simulate(5, 9, 2, 8, draws, &emitted);
    ShufflePosition p;
    p.emitted = draws;
    const ShuffleReplay got = ReplayShuffle(5, 9, 2, 8, p);
    EXPECT_EQ(got.slots, want.slots) << draws << " draws";
    EXPECT_EQ(got.next, want.next) << draws << " draws";
  }
}

TEST(ShuffleState, DrawsDependOnEveryPartOfTheKeyAndStayInRange) {
  std::vector<size_t> by_seed, by_epoch;
  for (int64_t d = 0; d < 64; ++d) {
    const size_t a = ShuffleDraw(1, 2, 3, d, 10), b = ShuffleDraw(7, 2, 3, d, 10), c = ShuffleDraw(1, 2, 4, d, 10);
    ASSERT_LT(a, 10u);
    by_seed.push_back(a == b);
    by_epoch.push_back(a == c);
    EXPECT_EQ(a, ShuffleDraw(1, 2, 3, d, 10));  // a function of the key
  }
  EXPECT_LT(std::count(by_seed.begin(), by_seed.end(), 1u), 64);
  EXPECT_LT(std::count(by_epoch.begin(), by_epoch.end(), 1u), 64);
}

TEST(HeldRows, TheOldestIsTheFirstRowNotYetReleased) {
  HeldRows held;
  held.Reset(10);
  for (int64_t r = 0; r < 4; ++r) held.Add(RowOrigin{0, 100 + r}, /*held=*/true);
  EXPECT_EQ(held.oldest(), 10);
  held.Release(11);  // out of order: the oldest stays
  EXPECT_EQ(held.oldest(), 10);
  EXPECT_EQ(held.oldest_origin().record, 100);
  held.Release(10);
  EXPECT_EQ(held.oldest(), 12);
  EXPECT_EQ(held.oldest_origin().record, 102);
}

TEST(ShuffleLog, TakingAMarkDropsTheOnesBeforeIt) {
  ShuffleLog log;
  std::vector<ShuffleMark> marks(3);
  for (int i = 0; i < 3; ++i) marks[i].sample_id = 10 + i, marks[i].position.emitted = i + 1;
  log.Add(marks);
  std::optional<ShuffleMark> m = log.Take(0, 11);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->position.emitted, 2);
  EXPECT_FALSE(log.Take(0, 10).has_value());  // dropped with the take of 11
  EXPECT_FALSE(log.Take(1, 12).has_value());  // another epoch
  EXPECT_TRUE(log.Take(0, 12).has_value());
}

TEST(ShuffleLog, AStoppedLogKeepsNothing) {
  ShuffleLog log;
  log.Stop();
  std::vector<ShuffleMark> marks(1);
  marks[0].sample_id = 1;
  log.Add(marks);
  EXPECT_FALSE(log.Take(0, 1).has_value());
}

}  // namespace
}  // namespace sluice::exec
