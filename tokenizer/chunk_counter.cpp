#include "tokenizer/chunk_counter.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/byte_level_bpe.h"

namespace mygpt::bpe {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: every bit of the input reaches the high and low bits
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t ChunkTable::hash(std::string_view chunk) {
  // Eight bytes a step: chunks are mostly short words, but whitespace runs can be long.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ chunk.size();
  std::size_t i = 0;
  for (; i + 8 <= chunk.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, chunk.data() + i, 8);
    h = mix(h ^ word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, chunk.data() + i, chunk.size() - i);
  return mix(h ^ tail ^ (uint64_t{0xFF} << 56));
}

void ChunkTable::clear() {
  // A table that grew large gives its memory back (a worker's after one odd batch, a shard once absorbed).
  if (slots_.empty() || slots_.size() > (std::size_t{1} << 16)) {
    std::vector<Slot>(std::size_t{1} << 10).swap(slots_);
    std::string().swap(arena_);
  } else {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    arena_.clear();
  }
  mask_ = slots_.size() - 1;
  size_ = 0;
}

void ChunkTable::add(std::string_view chunk, uint64_t chunk_hash, int64_t count) {
  for (std::size_t i = slot_of(chunk_hash);; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.count == 0) {
      slot = Slot{chunk_hash, arena_.size(), chunk.size(), count};
      arena_.append(chunk);
      if (2 * ++size_ > slots_.size()) grow();  // load factor <= 1/2 keeps probe runs short
      return;
    }
    if (slot.hash == chunk_hash && slot.length == chunk.size() &&
        std::memcmp(arena_.data() + slot.offset, chunk.data(), chunk.size()) == 0) {
      slot.count += count;
      return;
    }
  }
}

void ChunkTable::grow() {
  std::vector<Slot> old(2 * slots_.size());
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  for (const Slot& entry : old) {
    if (entry.count == 0) continue;
    std::size_t i = slot_of(entry.hash);
    while (slots_[i].count != 0) i = (i + 1) & mask_;
    slots_[i] = entry;
  }
}

void ChunkTable::absorb(ChunkTable& other) {
  for (const Slot& slot : other.slots_) {
    if (slot.count != 0) add(std::string_view(other.arena_).substr(slot.offset, slot.length), slot.hash, slot.count);
  }
  other.clear();
}

ChunkCounter::ChunkCounter(const std::string& pcre2_pattern, const std::string& what, int threads)
    : max_queued_(2 * static_cast<std::size_t>(std::max(1, threads))), shards_(kShards), shard_mutexes_(kShards) {
  PretokenPattern check(pcre2_pattern, what);  // a bad pattern is refused here, not on a worker
  for (int t = 0; t < std::max(1, threads); ++t) workers_.emplace_back([this, pcre2_pattern] { work(pcre2_pattern); });
}

ChunkCounter::~ChunkCounter() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  work_ready_.notify_all();
  room_ready_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

void ChunkCounter::add(std::string piece) {
  batch_bytes_ += piece.size();
  batch_.push_back(std::move(piece));
  if (batch_bytes_ >= kBatchBytes) submit_batch();
}

void ChunkCounter::submit_batch() {
  if (batch_.empty()) return;
  std::unique_lock lock(mutex_);
  room_ready_.wait(lock, [&] { return queue_.size() < max_queued_ || failure_ || closing_; });
  if (failure_) std::rethrow_exception(failure_);
  queue_.push_back(std::move(batch_));
  lock.unlock();
  work_ready_.notify_one();
  batch_.clear();
  batch_bytes_ = 0;
}

void ChunkCounter::work(const std::string& pcre2_pattern) {
  try {
    PretokenPattern pattern(pcre2_pattern, "split pattern");
    std::vector<ChunkTable> local(kShards);
    for (;;) {
      std::vector<std::string> batch;
      {
        std::unique_lock lock(mutex_);
        work_ready_.wait(lock, [&] { return !queue_.empty() || closing_; });
        if (queue_.empty()) return;
        batch = std::move(queue_.front());
        queue_.pop_front();
      }
      room_ready_.notify_one();
      for (const std::string& text : batch) {
        for (std::size_t offset = 0; offset < text.size();) {
          const auto match = pattern.next(text, offset);
          if (!match) break;
          const auto [begin, end] = *match;
          if (end == begin) {  // an empty match counts nothing (it has no pairs); step past one character
            offset = end + 1;
            while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
            continue;
          }
          const std::string_view chunk(text.data() + begin, end - begin);
          const uint64_t h = ChunkTable::hash(chunk);
          local[h & (kShards - 1)].add(chunk, h, 1);
          offset = end;
        }
      }
      // Into the shared table after every batch: the local tables stay as small as one batch's chunks.
      for (std::size_t s = 0; s < kShards; ++s) {
        if (local[s].size() == 0) continue;
        std::lock_guard lock(shard_mutexes_[s]);
        shards_[s].absorb(local[s]);
      }
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::current_exception();
    closing_ = true;
    room_ready_.notify_all();
  }
}

ChunkTable ChunkCounter::finish() {
  submit_batch();
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  if (failure_) std::rethrow_exception(failure_);
  ChunkTable all;
  for (ChunkTable& shard : shards_) all.absorb(shard);
  return all;
}

}  // namespace mygpt::bpe
