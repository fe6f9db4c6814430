#pragma once
// CPython's random.Random, as far as nanochat's CORE evaluation uses it: the Mersenne Twister seeded
// from an integer as CPython seeds it (init_by_array over the integer's 32-bit words), getrandbits,
// _randbelow (by rejection over getrandbits), shuffle and sample (both its pool and its set branch).
// Same seed, same calls -> the same numbers as python3, so few-shot examples and the per-task subset
// are the items nanochat picks.
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace mygpt {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative integer seed (CPython seeds with abs(seed)).
  explicit PythonRandom(uint64_t seed);

  // random.getrandbits(k), 0 <= k <= 64.
  uint64_t getrandbits(int k);
  // random._randbelow(n) for n > 0 (a number in [0, n)).
  uint64_t randbelow(uint64_t n);

  // random.shuffle(x) on x, in place.
  template <typename T>
  void shuffle(std::vector<T>& x) {
    for (size_t i = x.size(); i-- > 1;) {
      const auto j = static_cast<size_t>(randbelow(i + 1));
      std::swap(x[i], x[j]);
    }
  }
  // random.sample(range(n), k) as positions into the population; k <= n (std::invalid_argument otherwise).
  std::vector<size_t> sample_positions(size_t n, size_t k);
  template <typename T>
  std::vector<T> sample(const std::vector<T>& population, size_t k) {
    std::vector<T> out;
    out.reserve(k);
    for (size_t i : sample_positions(population.size(), k)) out.push_back(population[i]);
    return out;
  }

 private:
  uint32_t next_word();
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);

  std::array<uint32_t, 624> state_{};
  int index_ = 625;
};

}  // namespace mygpt
