#pragma once
// The second half of training a BPE: the merges, learned from the counted chunks as rustbpe learns them.
// Each step merges the pair of adjacent tokens that occurs most often, counted over every chunk times its
// count; of pairs that occur equally often the smallest (left id, then right id) wins. New tokens take
// ids 256, 257, ... in merge order; a chunk is merged left to right without overlaps.
//
// The counts are kept exact by updates, never recounted: merging a pair changes only the pairs beside
// its occurrences, and an index from each pair to the chunks that hold it says where those are. A
// max-heap of (count, pair) entries, refreshed lazily when a popped entry's count is stale, finds the
// next pair: a pair's count only falls after the merge that creates it, so a popped entry whose count is
// current is the largest.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "tokenizer/chunk_counter.h"

namespace mygpt::bpe {

struct LearnedMerge {
  uint32_t left, right;  // ids; the merged token's id is 256 + its index
  int64_t count;         // occurrences when it was merged
};

// At most `merges` merges (fewer when no pair is left). `progress(done)` is called every few merges.
std::vector<LearnedMerge> learn_merges(const ChunkTable& chunks, std::size_t merges,
                                       const std::function<void(std::size_t done)>& progress = nullptr);

}  // namespace mygpt::bpe
