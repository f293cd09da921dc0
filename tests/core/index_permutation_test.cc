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
  for (int64_t n :
       {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{17}, int64_t{64}, int64_t{1000},
        int64_t{4097}, int64_t{65536}, int64_t{100003}, IndexPermutation::kTabled, IndexPermutation::kTabled + 3}) {
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

// Orders of a few items: every order of 16 was even (half of all orders
// never came), and 20 items' places leaned to their own order.
TEST(IndexPermutation, OrdersOfFewItemsAreUniform) {
  int odd = 0;
  for (uint64_t key = 0; key < 200; ++key) {
    std::vector<int64_t> order = Order(16, key);
    int cycles = 0;  // parity: n minus the number of cycles
    std::vector<bool> seen(16, false);
    for (int64_t i = 0; i < 16; ++i) {
      if (seen[i]) continue;
      ++cycles;
      for (int64_t j = i; !seen[j]; j = order[j]) seen[j] = true;
    }
    odd += (16 - cycles) % 2;
  }
  EXPECT_GT(odd, 60);  // about 100 of 200; fewer than 61 has p < 1e-7
  EXPECT_LT(odd, 140);
  // Item by place, 20 items over 4000 keys: chi-square with 361 degrees of
  // freedom, under 470 (p = 1e-4; the Feistel network gave 574 over 10,000).
  std::vector<std::vector<double>> count(20, std::vector<double>(20, 0));
  for (uint64_t key = 0; key < 4000; ++key) {
    const std::vector<int64_t> order = Order(20, key);
    for (int64_t place = 0; place < 20; ++place) ++count[order[place]][place];
  }
  double chi2 = 0;
  for (const auto& row : count) {
    for (double c : row) chi2 += (c - 200) * (c - 200) / 200;
  }
  EXPECT_LT(chi2, 470);
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
