#include "sluice/core/index_permutation.h"

#include <algorithm>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

std::vector<int64_t> Order(int64_t n, uint64_t key) {
  const IndexPermutation perm(n, key);
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i) order.push_back(perm(i));
  return order;
}

TEST(IndexPermutation, IsABijectionOfEverySize) {
  for (int64_t n : {1, 2, 3, 4, 5, 17, 64, 1000, 4097, 65536, 100003}) {
    std::vector<int64_t> order = Order(n, 42);
    std::sort(order.begin(), order.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(order[i], i) << "n " << n;
  }
}

TEST(IndexPermutation, AnotherKeyIsAnotherOrderAndNeitherIsTheIdentity) {
  const std::vector<int64_t> a = Order(1000, 1), b = Order(1000, 2);
  EXPECT_NE(a, b);
  int fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += a[i] == i;
  EXPECT_LT(fixed, 10);  // a random permutation fixes one point on average
  EXPECT_EQ(Order(1000, 1), a);
}

// A dataset sorted by class (ImageFolder's order), 10 classes of 1000: runs
// of 256 places hold nearly every class, as DataLoader's shuffle does (a
// uniform shuffle: 9.97 of 10 on average).
TEST(IndexPermutation, RunsOfPlacesMixADatasetSortedByClass) {
  const IndexPermutation perm(10000, 7);
  double classes = 0;
  for (int64_t start = 0; start + 256 <= 10000; start += 256) {
    std::set<int64_t> seen;
    for (int64_t i = start; i < start + 256; ++i) seen.insert(perm(i) / 1000);
    classes += static_cast<double>(seen.size());
  }
  EXPECT_GE(classes / (10000 / 256), 9.8);
}

}  // namespace
}  // namespace sluice
