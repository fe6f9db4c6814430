#include "tokenizer/bpe_merger.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace mygpt::bpe {
namespace {

uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

// Every pair seen, as dense indices: its count, the chunks that hold (or held) it, and an open-addressing
// index from the pair's key.
class PairTable {
 public:
  explicit PairTable(std::size_t expected) {
    std::size_t capacity = 1024;
    while (capacity < 2 * expected) capacity *= 2;
    slots_.assign(capacity, kEmpty);
    mask_ = capacity - 1;
  }

  uint32_t index_of(uint64_t key) {
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const uint32_t at = slots_[i];
      if (at == kEmpty) {
        const auto index = static_cast<uint32_t>(keys.size());
        slots_[i] = index;
        keys.push_back(key);
        counts.push_back(0);
        where.emplace_back();
        touched.push_back(0);
        if (2 * keys.size() > slots_.size()) grow();
        return index;
      }
      if (keys[at] == key) return at;
    }
  }

  std::vector<uint64_t> keys;
  std::vector<int64_t> counts;
  std::vector<std::vector<uint32_t>> where;  // chunk indices, each once per merge that adds it
  std::vector<uint32_t> touched;             // the merge that last raised the count

 private:
  static constexpr uint32_t kEmpty = std::numeric_limits<uint32_t>::max();
  std::size_t slot_of(uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }
  void grow() {
    std::vector<uint32_t> old(2 * slots_.size(), kEmpty);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (uint32_t index = 0; index < keys.size(); ++index) {
      std::size_t i = slot_of(keys[index]);
      while (slots_[i] != kEmpty) i = (i + 1) & mask_;
      slots_[i] = index;
    }
  }
  std::vector<uint32_t> slots_;
  std::size_t mask_ = 0;
};

struct HeapEntry {
  int64_t count;
  uint64_t key;
};
// std::push_heap keeps the "largest" on top: the larger count, then the smaller pair.
bool lower_priority(const HeapEntry& a, const HeapEntry& b) {
  return a.count != b.count ? a.count < b.count : a.key > b.key;
}

}  // namespace

std::vector<LearnedMerge> learn_merges(const ChunkTable& chunks, std::size_t merges,
                                       const std::function<void(std::size_t)>& progress) {
  if (chunks.size() >= std::numeric_limits<uint32_t>::max()) {
    throw std::length_error("BPE training: more than 2^32 distinct chunks");
  }
  // Each chunk as its tokens in one arena; merging shortens a chunk in place.
  std::vector<uint32_t> symbols;
  symbols.reserve(chunks.arena_bytes());
  std::vector<uint64_t> begin;
  std::vector<uint32_t> length;
  std::vector<int64_t> weight;
  begin.reserve(chunks.size());
  length.reserve(chunks.size());
  weight.reserve(chunks.size());
  chunks.for_each([&](std::string_view chunk, int64_t count) {
    begin.push_back(symbols.size());
    length.push_back(static_cast<uint32_t>(chunk.size()));
    weight.push_back(count);
    for (const char c : chunk) symbols.push_back(static_cast<unsigned char>(c));
  });

  PairTable pairs(std::min<std::size_t>(symbols.size(), std::size_t{1} << 24));
  for (uint32_t w = 0; w < begin.size(); ++w) {
    const uint32_t* s = symbols.data() + begin[w];
    for (uint32_t i = 0; i + 1 < length[w]; ++i) {
      const uint32_t p = pairs.index_of(pair_key(s[i], s[i + 1]));
      pairs.counts[p] += weight[w];
      if (pairs.where[p].empty() || pairs.where[p].back() != w) pairs.where[p].push_back(w);
    }
  }
  std::vector<HeapEntry> heap;
  heap.reserve(pairs.keys.size());
  for (uint32_t p = 0; p < pairs.keys.size(); ++p) {
    if (pairs.counts[p] > 0) heap.push_back({pairs.counts[p], pairs.keys[p]});
  }
  std::make_heap(heap.begin(), heap.end(), lower_priority);

  std::vector<LearnedMerge> learned;
  learned.reserve(merges);
  std::vector<uint32_t> merged_in(begin.size(), 0);  // the merge that last rewrote each chunk
  std::vector<uint32_t> raised;                       // pairs whose count this merge raised
  while (learned.size() < merges && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const HeapEntry top = heap.back();
    heap.pop_back();
    const uint32_t top_index = pairs.index_of(top.key);
    const int64_t current = pairs.counts[top_index];
    if (current <= 0) continue;
    if (current != top.count) {  // stale: requeue at its count now
      heap.push_back({current, top.key});
      std::push_heap(heap.begin(), heap.end(), lower_priority);
      continue;
    }
    const auto a = static_cast<uint32_t>(top.key >> 32), b = static_cast<uint32_t>(top.key);
    const auto new_id = static_cast<uint32_t>(256 + learned.size());
    learned.push_back({a, b, current});
    const auto stamp = static_cast<uint32_t>(learned.size());

    std::vector<uint32_t> where = std::move(pairs.where[top_index]);
    pairs.where[top_index] = {};
    for (const uint32_t w : where) {
      if (merged_in[w] == stamp) continue;
      merged_in[w] = stamp;
      const int64_t c = weight[w];
      uint32_t* s = symbols.data() + begin[w];
      const uint32_t n = length[w];
      auto change = [&](uint32_t left, uint32_t right, int64_t delta) {
        const uint32_t p = pairs.index_of(pair_key(left, right));
        pairs.counts[p] += delta;
        if (delta > 0) {
          if (pairs.where[p].empty() || pairs.where[p].back() != w) pairs.where[p].push_back(w);
          if (pairs.touched[p] != stamp) {
            pairs.touched[p] = stamp;
            raised.push_back(p);
          }
        }
      };
      // Left to right, without overlaps; the pairs beside each occurrence change (rustbpe's merge_pair).
      uint32_t out = 0;
      for (uint32_t i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
          if (out > 0) {
            change(s[out - 1], a, -c);
            change(s[out - 1], new_id, c);
          }
          change(a, b, -c);
          if (i + 2 < n) {
            change(b, s[i + 2], -c);
            change(new_id, s[i + 2], c);
          }
          s[out++] = new_id;
          i += 2;
        } else {
          s[out++] = s[i++];
        }
      }
      length[w] = out;
    }
    for (const uint32_t p : raised) {
      if (pairs.counts[p] > 0) {
        heap.push_back({pairs.counts[p], pairs.keys[p]});
        std::push_heap(heap.begin(), heap.end(), lower_priority);
      }
    }
    raised.clear();
    if (progress && learned.size() % 64 == 0) progress(learned.size());
  }
  if (progress) progress(learned.size());
  return learned;
}

}  // namespace mygpt::bpe
