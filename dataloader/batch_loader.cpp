#include "dataloader/batch_loader.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <vector>

namespace mygpt {
namespace {

void require_enough_tokens(const TokenSource& source, int64_t batch_size, int64_t seq_len) {
  if (batch_size <= 0 || seq_len <= 0) throw std::logic_error("batch size and sequence length must be positive");
  const uint64_t needed = static_cast<uint64_t>(batch_size * seq_len) + 1;
  if (source.size() < needed) {
    throw std::invalid_argument("data holds " + std::to_string(source.size()) +
                                " tokens, fewer than one batch needs (" + std::to_string(needed) +
                                " = --batch-size x --seq-len + 1)");
  }
}

// Pinned host memory lets the copy to a CUDA device run asynchronously.
torch::Tensor host_buffer(int64_t n, const torch::Device& device) {
  return torch::empty({n}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(device.is_cuda()));
}

Batch to_device(const torch::Tensor& x, const torch::Tensor& y, const torch::Device& device) {
  return {x.to(device, /*non_blocking=*/true), y.to(device, /*non_blocking=*/true)};
}

// The sequential and the shuffled loader keep one number, the batches all ranks have read, so either
// resumes the other's checkpoint at the same count of tokens.
torch::Tensor position_state(uint64_t position) { return torch::tensor({static_cast<int64_t>(position)}, torch::kLong); }

uint64_t position_of(const torch::Tensor& state, const char* loader) {
  if (state.numel() != 1 || state.scalar_type() != torch::kLong) {
    throw std::invalid_argument(std::string("data loader state is not a ") + loader + "-loader position");
  }
  return static_cast<uint64_t>(state.item<int64_t>());
}

// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose output is fixed by its definition, so an
// epoch's order is the same on every machine, compiler and torch version (std::shuffle and
// std::uniform_int_distribution are implementation-defined).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) by Lemire's multiply-shift; the bias, below bound / 2^64, does not matter here.
  uint64_t below(uint64_t bound) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64); }
};

}  // namespace

std::unique_ptr<BatchLoader> make_batch_loader(DataOrder order, std::shared_ptr<const TokenSource> source,
                                               int64_t batch_size, int64_t seq_len, uint64_t seed, int rank,
                                               int world_size, Packing packing, int64_t bos) {
  if (packing == Packing::best_fit) {
    return std::make_unique<BestFitBatchLoader>(std::move(source), batch_size, seq_len, bos, rank, world_size);
  }
  if (order == DataOrder::random)
    return std::make_unique<RandomBatchSampler>(std::move(source), batch_size, seq_len, seed, rank);
  if (order == DataOrder::shuffled)
    return std::make_unique<ShuffledBatchLoader>(std::move(source), batch_size, seq_len, seed, rank, world_size);
  if (order == DataOrder::automatic) throw std::logic_error("the data order must be resolved before loading");
  return std::make_unique<ShardedBatchLoader>(std::move(source), batch_size, seq_len, rank, world_size);
}

ShardedBatchLoader::ShardedBatchLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size, int64_t seq_len,
                                       int rank, int world_size)
    : source_(std::move(source)), batch_size_(batch_size), seq_len_(seq_len), rank_(rank), world_size_(world_size) {
  require_enough_tokens(*source_, batch_size, seq_len);
  if (world_size <= 0 || rank < 0 || rank >= world_size) throw std::logic_error("bad rank/world size");
}

uint64_t ShardedBatchLoader::chunks_per_epoch() const {
  return source_->size() / static_cast<uint64_t>(batch_size_ * seq_len_);
}

uint64_t ShardedBatchLoader::whole_chunks() const {
  return (source_->size() - 1) / static_cast<uint64_t>(batch_size_ * seq_len_);  // the constructor saw B*T+1 tokens
}

Batch ShardedBatchLoader::next(const torch::Device& device) {
  const int64_t chunk = batch_size_ * seq_len_;
  auto buffer = host_buffer(chunk + 1, device);
  const uint64_t offset = (position_ + static_cast<uint64_t>(rank_)) * static_cast<uint64_t>(chunk);
  source_->read(offset, static_cast<size_t>(chunk + 1), buffer.data_ptr<int64_t>());
  position_ += static_cast<uint64_t>(world_size_);
  return to_device(buffer.slice(0, 0, chunk).view({batch_size_, seq_len_}),
                   buffer.slice(0, 1, chunk + 1).view({batch_size_, seq_len_}), device);
}

torch::Tensor ShardedBatchLoader::state() const { return position_state(position_); }

void ShardedBatchLoader::load_state(const torch::Tensor& state) { position_ = position_of(state, "sequential"); }

RandomBatchSampler::RandomBatchSampler(std::shared_ptr<const TokenSource> source, int64_t batch_size, int64_t seq_len,
                                       uint64_t seed, int rank)
    : source_(std::move(source)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      // Distinct, reproducible streams per rank: mix the rank into the seed with a large odd constant.
      generator_(
          at::make_generator<at::CPUGeneratorImpl>(seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank + 1))) {
  require_enough_tokens(*source_, batch_size, seq_len);
}

Batch RandomBatchSampler::next(const torch::Device& device) {
  const auto max_offset = static_cast<int64_t>(source_->size()) - seq_len_;  // exclusive bound
  auto offsets = torch::randint(max_offset, {batch_size_}, generator_, torch::kLong);
  // x and y each contiguous in one pinned buffer: views into interleaved (T+1)-token rows would be
  // strided, and a strided host tensor is first copied into pageable memory, which makes the copy to
  // the GPU wait for the device (a stall per micro-batch).
  const int64_t n = batch_size_ * seq_len_;
  auto buffer = host_buffer(2 * n, device);
  auto* x = buffer.data_ptr<int64_t>();
  auto* y = x + n;
  const auto* off = offsets.data_ptr<int64_t>();
  std::vector<int64_t> row(static_cast<size_t>(seq_len_ + 1));
  for (int64_t b = 0; b < batch_size_; ++b) {
    source_->read(static_cast<uint64_t>(off[b]), row.size(), row.data());
    std::copy(row.begin(), row.end() - 1, x + b * seq_len_);
    std::copy(row.begin() + 1, row.end(), y + b * seq_len_);
  }
  return to_device(buffer.slice(0, 0, n).view({batch_size_, seq_len_}),
                   buffer.slice(0, n, 2 * n).view({batch_size_, seq_len_}), device);
}

torch::Tensor RandomBatchSampler::state() const { return generator_.get_state(); }

void RandomBatchSampler::load_state(const torch::Tensor& state) {
  if (state.scalar_type() != torch::kByte) throw std::invalid_argument("data loader state is not a generator state");
  generator_.set_state(state);
}

BestFitBatchLoader::BestFitBatchLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size,
                                       int64_t seq_len, int64_t bos, int rank, int world_size)
    : source_(source),
      batch_size_(batch_size),
      seq_len_(seq_len),
      rank_(rank),
      world_size_(world_size),
      packer_((require_enough_tokens(*source, batch_size, seq_len), source), bos, static_cast<uint64_t>(seq_len) + 1) {
  if (world_size <= 0 || rank < 0 || rank >= world_size) throw std::logic_error("bad rank/world size");
}

Batch BestFitBatchLoader::next(const torch::Device& device) {
  const int64_t row = seq_len_ + 1;
  auto buffer = host_buffer(batch_size_ * row, device);
  auto* out = buffer.data_ptr<int64_t>();
  // The batches of all ranks come from one packer, in rank order: this rank reads its own.
  for (int r = 0; r < world_size_; ++r) {
    for (int64_t b = 0; b < batch_size_; ++b) {
      const std::vector<TokenSpan> spans = packer_.next_row();
      if (r != rank_) continue;
      int64_t* at = out + b * row;
      for (const TokenSpan& span : spans) {
        source_->read(span.offset, static_cast<size_t>(span.length), at);
        at += span.length;
      }
    }
  }
  position_ += static_cast<uint64_t>(world_size_);
  auto rows = buffer.view({batch_size_, row});
  return to_device(rows.slice(1, 0, seq_len_), rows.slice(1, 1, row), device);
}

torch::Tensor BestFitBatchLoader::state() const {
  std::vector<int64_t> state = {static_cast<int64_t>(position_)};
  const std::vector<int64_t> packer = packer_.state();
  state.insert(state.end(), packer.begin(), packer.end());
  return torch::tensor(state, torch::kLong);
}

void BestFitBatchLoader::load_state(const torch::Tensor& state) {
  if (state.dim() != 1 || state.scalar_type() != torch::kLong || state.numel() < 2) {
    throw std::invalid_argument("data loader state is not a best-fit packing state (was the run packed in rows?)");
  }
  const auto values = state.contiguous();
  const int64_t* v = values.data_ptr<int64_t>();
  packer_.load_state(std::span<const int64_t>(v + 1, static_cast<std::size_t>(values.numel() - 1)));
  position_ = static_cast<uint64_t>(v[0]);
}

std::string BestFitBatchLoader::report() const {
  const uint64_t placed = packer_.placed_tokens(), cropped = packer_.cropped_tokens();
  if (placed + cropped == 0) return {};
  char line[256];
  std::snprintf(line, sizeof line,
                "packing best-fit: %llu tokens in rows, %llu cropped (%.1f%% of the documents' tokens read)",
                static_cast<unsigned long long>(placed), static_cast<unsigned long long>(cropped),
                100.0 * static_cast<double>(cropped) / static_cast<double>(placed + cropped));
  return line;
}

std::optional<double> BestFitBatchLoader::dropped_share() const {
  const uint64_t placed = packer_.placed_tokens(), cropped = packer_.cropped_tokens();
  if (placed + cropped == 0) return std::nullopt;
  return static_cast<double>(cropped) / static_cast<double>(placed + cropped);
}

DataOrder resolve_data_order(DataOrder requested, uint64_t train_tokens, uint64_t tokens_the_run_reads) {
  if (requested != DataOrder::automatic) return requested;
  return tokens_the_run_reads > train_tokens ? DataOrder::shuffled : DataOrder::sequential;
}

const char* data_order_name(DataOrder order) {
  switch (order) {
    case DataOrder::automatic: return "auto";
    case DataOrder::sequential: return "sequential";
    case DataOrder::shuffled: return "shuffled";
    case DataOrder::random: return "random";
  }
  return "?";
}

ShuffledBatchLoader::ShuffledBatchLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size,
                                         int64_t seq_len, uint64_t seed, int rank, int world_size)
    : source_(std::move(source)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      seed_(seed),
      rank_(rank),
      world_size_(world_size) {
  require_enough_tokens(*source_, batch_size, seq_len);
  if (world_size <= 0 || rank < 0 || rank >= world_size) throw std::logic_error("bad rank/world size");
  const auto t = static_cast<uint64_t>(seq_len);
  // Block i's row starts at an offset in [0, T) within it (row_start); a stream too short to keep a
  // batch of rows after such an offset keeps offset 0. A row reads T + 1 tokens (inputs, targets).
  const uint64_t usable = source_->size() - 1;
  max_offset_ = (usable - (t - 1)) / t >= static_cast<uint64_t>(batch_size) ? t - 1 : 0;
  rows_per_epoch_ = (usable - max_offset_) / t;
  if (rows_per_epoch_ > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument("--data-order shuffled: the data holds more than 2^32 rows of --seq-len tokens; "
                                "use --data-order sequential");
  }
}

const ShuffledBatchLoader::EpochOrder& ShuffledBatchLoader::order_of(uint64_t epoch) {
  for (const EpochOrder& o : orders_) {
    if (o.epoch == epoch) return o;
  }
  EpochOrder& o = orders_[epoch % 2];
  SplitMix64 random{seed_ ^ (0xD1B54A32D192ED03ULL * (epoch + 1))};
  o.epoch = epoch;
  o.shift = random.below(max_offset_ + 1);
  o.rows.resize(rows_per_epoch_);
  for (uint64_t i = 0; i < rows_per_epoch_; ++i) o.rows[i] = static_cast<uint32_t>(i);
  for (uint64_t i = rows_per_epoch_; i > 1; --i) std::swap(o.rows[i - 1], o.rows[random.below(i)]);  // Fisher-Yates
  return o;
}

uint64_t ShuffledBatchLoader::row_start(uint64_t row) {
  const EpochOrder& o = order_of(row / rows_per_epoch_);
  const uint64_t block = o.rows[row % rows_per_epoch_];
  // One offset for a whole epoch started every row at the same place modulo T, so data made of
  // records whose length shares a factor with T (builtin:sort's 14-token lines, T = 32) showed only
  // some of the record phases in an epoch, and the model learned those phases instead of the task.
  // The offset rises with the block instead, by at most one token from a block to the next, through
  // every value below T in an epoch (then a batch of permuted blocks holds rows at every phase), and
  // starts at the epoch's shift (so each epoch cuts the text elsewhere). Rising, the rows do not
  // overlap, except once by fewer than T tokens where the offset wraps to 0, and the gaps between them
  // add up to fewer than T tokens: an epoch still reads its data once.
  const uint64_t span = max_offset_ + 1;
  const auto ramp = static_cast<uint64_t>(static_cast<unsigned __int128>(block) * span / rows_per_epoch_);
  return block * static_cast<uint64_t>(seq_len_) + (o.shift + ramp) % span;
}

Batch ShuffledBatchLoader::next(const torch::Device& device) {
  auto buffer = host_buffer(batch_size_ * (seq_len_ + 1), device);
  auto* out = buffer.data_ptr<int64_t>();
  const uint64_t first_row = (position_ + static_cast<uint64_t>(rank_)) * static_cast<uint64_t>(batch_size_);
  for (int64_t b = 0; b < batch_size_; ++b) {
    source_->read(row_start(first_row + static_cast<uint64_t>(b)), static_cast<size_t>(seq_len_ + 1),
                  out + b * (seq_len_ + 1));
  }
  position_ += static_cast<uint64_t>(world_size_);
  auto rows = buffer.view({batch_size_, seq_len_ + 1});
  return to_device(rows.slice(1, 0, seq_len_), rows.slice(1, 1, seq_len_ + 1), device);
}

torch::Tensor ShuffledBatchLoader::state() const { return position_state(position_); }

void ShuffledBatchLoader::load_state(const torch::Tensor& state) { position_ = position_of(state, "shuffled"); }

}  // namespace mygpt
