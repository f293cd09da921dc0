#include "sluice/service/id_ranges.h"

#include <random>
#include <set>

#include "gtest/gtest.h"

namespace sluice::service {
namespace {

TEST(IdRanges, MergesTouchingAndOverlappingRanges) {
  IdRanges r;
  r.Add(10, 20);
  r.Add(30, 40);
  EXPECT_TRUE(r.Overlaps(19, 21));
  EXPECT_FALSE(r.Overlaps(20, 30));
  EXPECT_FALSE(r.Overlaps(0, 10));
  r.Add(20, 30);  // touches both: one range [10, 40)
  EXPECT_EQ(r.size(), 30);
  EXPECT_TRUE(r.Overlaps(25, 26));
  r.Add(5, 45);
  EXPECT_EQ(r.size(), 40);
  EXPECT_FALSE(r.Overlaps(45, 50));
  r.Add(7, 7);  // empty
  EXPECT_EQ(r.size(), 40);
}

// Against a std::set of the same ids, added in random runs.
TEST(IdRanges, AgreesWithASetOfIds) {
  std::mt19937 rng(3);
  IdRanges r;
  std::set<int64_t> ids;
  for (int i = 0; i < 2000; ++i) {
    const int64_t first = static_cast<int64_t>(rng() % 500) - 1;  // -1: an unknown origin's id
    const int64_t end = first + 1 + static_cast<int64_t>(rng() % 8);
    bool any = false;
    for (int64_t id = first; id < end; ++id) any |= ids.count(id) > 0;
    ASSERT_EQ(r.Overlaps(first, end), any) << first << ".." << end;
    r.Add(first, end);
    for (int64_t id = first; id < end; ++id) ids.insert(id);
    ASSERT_EQ(r.size(), static_cast<int64_t>(ids.size()));
  }
}

}  // namespace
}  // namespace sluice::service
