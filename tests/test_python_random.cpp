// CPython's random.Random reproduced: every expected value below is python3's own output (3.11), printed by
//   import random; random.Random(1337).getrandbits(32); r = random.Random(1234); [r.getrandbits(k) ...];
//   x = list(range(n)); random.Random(seed).shuffle(x); random.Random(seed).sample(range(n), k)
// The samples take both of sample's branches: a pool (n at most 21 + 4**ceil(log(3k, 4))) and a set.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "common/python_random.h"

namespace mygpt::python_random_test {
namespace {

TEST(PythonRandom, SeedsAsCPythonDoes) {
  const std::vector<std::pair<uint64_t, uint64_t>> first_words = {
      {0, 3626764237u}, {1, 577090037u}, {1337, 2653228291u}, {(1ull << 32) + 5, 675479763u},
      {(1ull << 63) + 12345, 1308997459u}};
  for (const auto& [seed, word] : first_words) EXPECT_EQ(PythonRandom(seed).getrandbits(32), word) << seed;
}

TEST(PythonRandom, GetrandbitsOfEveryWidth) {
  PythonRandom r(1234);
  const std::vector<std::pair<int, uint64_t>> expected = {{1, 1},           {7, 99},       {31, 946466063},
                                                          {32, 501869158},  {33, 32175636}, {53, 8489599478642800ull},
                                                          {64, 14886566920684039889ull}};
  for (const auto& [k, value] : expected) EXPECT_EQ(r.getrandbits(k), value) << k;
}

TEST(PythonRandom, Randbelow) {
  PythonRandom r(99);
  const std::vector<std::pair<uint64_t, uint64_t>> expected = {
      {1, 0}, {2, 1}, {3, 0}, {1000, 613}, {(1ull << 31) + 1, 767950141}, {(1ull << 40) + 3, 546449817472ull}};
  for (const auto& [n, value] : expected) EXPECT_EQ(r.randbelow(n), value) << n;
}

std::vector<int> shuffled(int n, uint64_t seed) {
  std::vector<int> x(static_cast<size_t>(n));
  std::iota(x.begin(), x.end(), 0);
  PythonRandom(seed).shuffle(x);
  return x;
}

TEST(PythonRandom, Shuffle) {
  EXPECT_EQ(shuffled(10, 1337), (std::vector<int>{0, 3, 7, 2, 1, 6, 4, 5, 8, 9}));
  EXPECT_EQ(shuffled(1, 1337), (std::vector<int>{0}));
  EXPECT_EQ(shuffled(0, 1337), (std::vector<int>{}));
  EXPECT_EQ(shuffled(37, 42), (std::vector<int>{5,  20, 12, 9,  22, 26, 27, 4,  24, 29, 33, 31, 32,
                                                10, 11, 19, 28, 16, 36, 6,  25, 0,  35, 13, 18, 2,
                                                34, 30, 21, 3,  23, 8,  14, 15, 17, 1,  7}));
}

TEST(PythonRandom, SampleTakesBothBranches) {
  struct Case {
    size_t n, k;
    uint64_t seed;
    std::vector<size_t> expected;
  };
  const std::vector<Case> cases = {
      {10, 3, 1234, {7, 1, 0}},                                     // pool
      {21, 10, 1235, {13, 17, 18, 15, 12, 4, 11, 5, 14, 10}},       // pool
      {30, 5, 1236, {17, 15, 23, 21, 25}},                          // set (k <= 5: setsize 21)
      {30, 6, 1237, {4, 28, 12, 9, 7, 25}},                         // pool (setsize 85)
      {100, 8, 1240, {82, 59, 45, 74, 66, 67, 5, 51}},              // set
      {1000, 40, 1241, {616, 617, 507, 782, 216, 288, 259, 954, 199, 729, 502, 565, 754, 539,
                        726, 290, 493, 53,  467, 488, 998, 928, 920, 394, 386, 274, 132, 977,
                        16,  694, 469, 43,  669, 151, 28,  76,  517, 505, 510, 523}},  // set
      {50, 50, 7, {20, 9,  25, 41, 3,  4,  34, 6,  23, 37, 45, 32, 13, 2,  5,  27, 26,
                   44, 15, 36, 17, 40, 1,  33, 18, 39, 7,  49, 22, 47, 43, 21, 12, 19,
                   46, 0,  8,  30, 38, 42, 29, 28, 16, 11, 48, 10, 31, 14, 35, 24}},  // pool, all of it
  };
  for (const Case& c : cases) {
    EXPECT_EQ(PythonRandom(c.seed).sample_positions(c.n, c.k), c.expected) << c.n << " " << c.k;
  }
  EXPECT_THROW(PythonRandom(1).sample_positions(3, 4), std::invalid_argument);
}

}  // namespace
}  // namespace mygpt::python_random_test
