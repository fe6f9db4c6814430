#pragma once
// The first half of training a BPE: how often each pre-token (a "chunk" the split pattern cuts) occurs
// in a corpus. Text goes in as a stream of pieces; worker threads split them with PCRE2 and count into
// tables of their own that they add, piece batch by piece batch, into one table sharded by hash. Memory
// grows with the number of distinct chunks, never with the corpus.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace mygpt::bpe {

// Chunk bytes -> count, as one open-addressing array over one arena of bytes: a node-based map spends
// the counting on allocations and pointer chasing.
class ChunkTable {
 public:
  ChunkTable() { clear(); }
  static uint64_t hash(std::string_view chunk);
  void add(std::string_view chunk, uint64_t chunk_hash, int64_t count);
  // Adds every entry of `other`, then empties it.
  void absorb(ChunkTable& other);
  void clear();
  std::size_t size() const { return size_; }
  std::size_t arena_bytes() const { return arena_.size(); }

  // Visits (chunk, count) in the table's order.
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (const Slot& slot : slots_) {
      if (slot.count != 0) visit(std::string_view(arena_).substr(slot.offset, slot.length), slot.count);
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    int64_t count = 0;  // 0 marks an empty slot
  };
  std::size_t slot_of(uint64_t chunk_hash) const { return static_cast<std::size_t>(chunk_hash >> 20) & mask_; }
  void grow();

  std::vector<Slot> slots_;
  std::size_t mask_ = 0, size_ = 0;
  std::string arena_;
};

// Splits pieces of text on worker threads and counts their chunks. add() blocks while the workers are
// behind (a few batches per thread wait at most), so a corpus streams through bounded memory.
class ChunkCounter {
 public:
  // `pcre2_pattern` as pcre2_pattern_of gives it; one that does not compile throws std::invalid_argument
  // starting with `what`.
  ChunkCounter(const std::string& pcre2_pattern, const std::string& what, int threads);
  ~ChunkCounter();
  ChunkCounter(const ChunkCounter&) = delete;
  ChunkCounter& operator=(const ChunkCounter&) = delete;

  // One piece of UTF-8 text, split on its own (matches never cross pieces).
  void add(std::string piece);
  // Waits for the workers; a worker's failure is rethrown here. The counts of every chunk seen.
  ChunkTable finish();

 private:
  static constexpr std::size_t kShards = 64;
  static constexpr std::size_t kBatchBytes = std::size_t{1} << 20;
  void submit_batch();
  void work(const std::string& pcre2_pattern);

  std::vector<std::string> batch_;
  std::size_t batch_bytes_ = 0;
  std::mutex mutex_;
  std::condition_variable work_ready_, room_ready_;
  std::deque<std::vector<std::string>> queue_;
  std::size_t max_queued_;
  bool closing_ = false;
  std::exception_ptr failure_;
  std::vector<ChunkTable> shards_;
  std::vector<std::mutex> shard_mutexes_;
  std::vector<std::thread> workers_;
};

}  // namespace mygpt::bpe
