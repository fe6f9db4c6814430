#include "dataloader/batch_loader.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
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

}  // namespace

std::unique_ptr<BatchLoader> make_batch_loader(DataOrder order, std::shared_ptr<const TokenSource> source,
                                               int64_t batch_size, int64_t seq_len, uint64_t seed, int rank,
                                               int world_size) {
  if (order == DataOrder::random)
    return std::make_unique<RandomBatchSampler>(std::move(source), batch_size, seq_len, seed, rank);
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

Batch ShardedBatchLoader::next(const torch::Device& device) {
  const int64_t chunk = batch_size_ * seq_len_;
  auto buffer = host_buffer(chunk + 1, device);
  const uint64_t offset = (position_ + static_cast<uint64_t>(rank_)) * static_cast<uint64_t>(chunk);
  source_->read(offset, static_cast<size_t>(chunk + 1), buffer.data_ptr<int64_t>());
  position_ += static_cast<uint64_t>(world_size_);
  return to_device(buffer.slice(0, 0, chunk).view({batch_size_, seq_len_}),
                   buffer.slice(0, 1, chunk + 1).view({batch_size_, seq_len_}), device);
}

torch::Tensor ShardedBatchLoader::state() const {
  return torch::tensor({static_cast<int64_t>(position_)}, torch::kLong);
}

void ShardedBatchLoader::load_state(const torch::Tensor& state) {
  if (state.numel() != 1 || state.scalar_type() != torch::kLong) {
    throw std::invalid_argument("data loader state is not a sequential-loader position");
  }
  position_ = static_cast<uint64_t>(state.item<int64_t>());
}

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

}  // namespace mygpt
