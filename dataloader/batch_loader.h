#pragma once
// Batch loaders: turn a token stream into (x, y) batches of shape (B, T), y being x shifted by one.
//
// ShardedBatchLoader walks the stream in consecutive chunks of B*T tokens. Its position counts chunks
// consumed by all ranks together: rank r of W reads chunk (position + r) and every rank advances the
// position by W. So W ranks with accumulation A read exactly the chunks that one process with
// accumulation W*A reads, which is what makes distributed training equal to single-process training.
//
// RandomBatchSampler draws B random offsets per batch (nanoGPT's get_batch), from its own generator
// seeded from (seed, rank) so that ranks see different samples.
#include <torch/torch.h>

#include <memory>

#include "dataloader/token_source.h"

namespace mygpt {

struct Batch {
  torch::Tensor x;  // (B, T) int64 inputs
  torch::Tensor y;  // (B, T) int64 next-token targets
};

class BatchLoader {
 public:
  virtual ~BatchLoader() = default;
  virtual Batch next(const torch::Device& device) = 0;
  // The loader's position as a tensor, for checkpoints; load_state restores it exactly.
  virtual torch::Tensor state() const = 0;
  virtual void load_state(const torch::Tensor& state) = 0;
  // True when every rank holds the same state, which then also means the same on another number of
  // ranks (the sequential position counts the chunks of all ranks); false for per-rank streams.
  virtual bool state_shared_by_all_ranks() const = 0;
};

// How a training loader walks the data: consecutive chunks sharded across ranks, or random offsets.
enum class DataOrder { sequential, random };

std::unique_ptr<BatchLoader> make_batch_loader(DataOrder order, std::shared_ptr<const TokenSource> source,
                                               int64_t batch_size, int64_t seq_len, uint64_t seed, int rank,
                                               int world_size);

class ShardedBatchLoader final : public BatchLoader {
 public:
  // Throws std::invalid_argument when the stream holds fewer than B*T+1 tokens.
  ShardedBatchLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size, int64_t seq_len, int rank = 0,
                     int world_size = 1);
  Batch next(const torch::Device& device) override;
  torch::Tensor state() const override;
  void load_state(const torch::Tensor& state) override;
  bool state_shared_by_all_ranks() const override { return true; }

  void reset() { position_ = 0; }
  uint64_t position() const { return position_; }
  // Chunks of B*T tokens in one pass over the stream (all ranks together).
  uint64_t chunks_per_epoch() const;

 private:
  std::shared_ptr<const TokenSource> source_;
  int64_t batch_size_, seq_len_;
  int rank_, world_size_;
  uint64_t position_ = 0;
};

class RandomBatchSampler final : public BatchLoader {
 public:
  RandomBatchSampler(std::shared_ptr<const TokenSource> source, int64_t batch_size, int64_t seq_len, uint64_t seed,
                     int rank = 0);
  Batch next(const torch::Device& device) override;
  torch::Tensor state() const override;
  void load_state(const torch::Tensor& state) override;
  bool state_shared_by_all_ranks() const override { return false; }

 private:
  std::shared_ptr<const TokenSource> source_;
  int64_t batch_size_, seq_len_;
  at::Generator generator_;
};

}  // namespace mygpt
