#include "common/python_random.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_set>

namespace mygpt {
namespace {
constexpr int kN = 624;
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;
}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  // CPython's random_seed: the integer's 32-bit words, least significant first; zero is one word 0.
  std::vector<uint32_t> key;
  for (uint64_t n = seed; n != 0; n >>= 32) key.push_back(static_cast<uint32_t>(n & 0xffffffffU));
  if (key.empty()) key.push_back(0);
  init_by_array(key);
}

void PythonRandom::init_genrand(uint32_t s) {
  state_[0] = s;
  for (int i = 1; i < kN; ++i) {
    state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  index_ = kN;
}

void PythonRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218U);
  int i = 1;
  size_t j = 0;
  const auto key_length = key.size();
  for (size_t k = std::max<size_t>(kN, key_length); k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
  }
  state_[0] = 0x80000000U;
}

uint32_t PythonRandom::next_word() {
  static constexpr uint32_t mag01[2] = {0U, kMatrixA};
  if (index_ >= kN) {
    int kk = 0;
    for (; kk < kN - kM; ++kk) {
      const uint32_t y = (state_[kk] & kUpperMask) | (state_[kk + 1] & kLowerMask);
      state_[kk] = state_[kk + kM] ^ (y >> 1) ^ mag01[y & 1U];
    }
    for (; kk < kN - 1; ++kk) {
      const uint32_t y = (state_[kk] & kUpperMask) | (state_[kk + 1] & kLowerMask);
      state_[kk] = state_[kk + (kM - kN)] ^ (y >> 1) ^ mag01[y & 1U];
    }
    const uint32_t y = (state_[kN - 1] & kUpperMask) | (state_[0] & kLowerMask);
    state_[kN - 1] = state_[kM - 1] ^ (y >> 1) ^ mag01[y & 1U];
    index_ = 0;
  }
  uint32_t y = state_[index_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

uint64_t PythonRandom::getrandbits(int k) {
  if (k < 0 || k > 64) throw std::invalid_argument("getrandbits: k must be in 0..64");
  if (k == 0) return 0;
  if (k <= 32) return next_word() >> (32 - k);
  // CPython fills 32-bit words from the least significant; the last (most significant) word is cut.
  const uint64_t low = next_word();
  const uint64_t high = next_word() >> (64 - k);
  return low | (high << 32);
}

uint64_t PythonRandom::randbelow(uint64_t n) {
  if (n == 0) throw std::invalid_argument("randbelow: n must be positive");
  int k = 0;
  for (uint64_t v = n; v != 0; v >>= 1) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<size_t> PythonRandom::sample_positions(size_t n, size_t k) {
  if (k > n) throw std::invalid_argument("sample larger than population");
  std::vector<size_t> result(k);
  size_t setsize = 21;  // CPython's threshold between its two branches, computed as it computes it
  if (k > 5) setsize += static_cast<size_t>(std::pow(4.0, std::ceil(std::log(static_cast<double>(k * 3)) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<size_t> pool(n);
    for (size_t i = 0; i < n; ++i) pool[i] = i;
    for (size_t i = 0; i < k; ++i) {
      const auto j = static_cast<size_t>(randbelow(n - i));
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<size_t> selected;
    for (size_t i = 0; i < k; ++i) {
      auto j = static_cast<size_t>(randbelow(n));
      while (selected.count(j) != 0) j = static_cast<size_t>(randbelow(n));
      selected.insert(j);
      result[i] = j;
    }
  }
  return result;
}

}  // namespace mygpt
