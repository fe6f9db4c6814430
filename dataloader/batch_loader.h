#pragma once
// Batch loaders: turn a token stream into (x, y) batches of shape (B, T), y being x shifted by one.
//
// ShardedBatchLoader walks the stream in consecutive chunks of B*T tokens. Its position counts chunks
// consumed by all ranks together: rank r of W reads chunk (position + r) and every rank advances the
// position by W. So W ranks with accumulation A read exactly the chunks that one process with
// accumulation W*A reads, which is what makes distributed training equal to single-process training.
//
// ShuffledBatchLoader keeps that position but reads rows of T tokens in a fresh order every epoch: the
// stream is cut into blocks of T tokens, the blocks are permuted from (seed, epoch) alone, and batch k
// is the rows of blocks k*B .. k*B+B-1 of that order. A row starts at an offset below T in its block
// that rises with the block through every value below T in an epoch, from a shift drawn per epoch, so
// an epoch shows rows at every phase of the text and cuts it elsewhere each epoch, while it still reads
// its data once: rows overlap only where the offset wraps from T - 1 to 0 (by fewer than T tokens), and
// the gaps between rows add up to fewer than T tokens. Ranks, resume and the N x A == 1 x N*A
// equivalence work as for the sequential loader, while a small corpus seen for many epochs is not
// walked in the same consecutive chunks each time (which trains worse: Tiny Shakespeare's validation
// loss 1.97 against 1.88, docs/benchmarks-log.md).
//
// BestFitBatchLoader (--packing best-fit) makes rows that each start at a document's first token, with
// documents placed best-fit and what does not fit cropped (dataloader/best_fit_packer.h). Batch k is the
// k-th B rows the packer makes of the whole stream; rank r of W takes batch (position + r), as the
// sequential loader takes chunks. Every rank runs the packer over every batch (finding documents costs a
// scan of their tokens; only its own rows are read whole), so its state is the same on every rank and on
// any number of ranks, and W ranks x A equal one rank x W*A.
//
// RandomBatchSampler draws B random offsets per batch (nanoGPT's get_batch), from its own generator
// seeded from (seed, rank) so that ranks see different samples.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataloader/best_fit_packer.h"
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
  // A line on what the loader dropped so far (best-fit packing's cropped tokens); empty when nothing.
  virtual std::string report() const { return {}; }
  // The share of the tokens read so far that the loader dropped (best-fit's cropped ones), for the step
  // lines as training goes; none where a loader drops nothing.
  virtual std::optional<double> dropped_share() const { return std::nullopt; }
};

// How a training loader walks the data: consecutive chunks sharded across ranks, rows shuffled per
// epoch (sharded the same way), or random offsets; automatic picks one of the first two.
enum class DataOrder { automatic, sequential, shuffled, random };

// automatic: shuffled when the run reads its training data more than once (a text, a small token file:
// several epochs), sequential when it reads it at most once (streamed shards such as FineWeb's, read
// in order as llm.c and build-nanogpt do). Other orders are returned as they are.
DataOrder resolve_data_order(DataOrder requested, uint64_t train_tokens, uint64_t tokens_the_run_reads);
const char* data_order_name(DataOrder order);

// How rows are cut from the stream: consecutive --seq-len tokens wherever they fall (rows, the data
// orders above), or documents packed best-fit from each row's start (best_fit, which needs `bos`).
enum class Packing { rows, best_fit };

std::unique_ptr<BatchLoader> make_batch_loader(DataOrder order, std::shared_ptr<const TokenSource> source,
                                               int64_t batch_size, int64_t seq_len, uint64_t seed, int rank,
                                               int world_size, Packing packing = Packing::rows, int64_t bos = -1);

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
  // Chunks whose targets (the token after each) lie in the stream too, read without wrapping to its start.
  uint64_t whole_chunks() const;
  int64_t batch_size() const { return batch_size_; }
  int64_t seq_len() const { return seq_len_; }

 private:
  std::shared_ptr<const TokenSource> source_;
  int64_t batch_size_, seq_len_;
  int rank_, world_size_;
  uint64_t position_ = 0;
};

class ShuffledBatchLoader final : public BatchLoader {
 public:
  // Throws std::invalid_argument when the stream holds fewer than B*T+1 tokens.
  ShuffledBatchLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size, int64_t seq_len, uint64_t seed,
                      int rank = 0, int world_size = 1);
  Batch next(const torch::Device& device) override;
  torch::Tensor state() const override;
  void load_state(const torch::Tensor& state) override;
  bool state_shared_by_all_ranks() const override { return true; }

  uint64_t position() const { return position_; }
  uint64_t rows_per_epoch() const { return rows_per_epoch_; }
  // Where row `row` of the whole run (all epochs, all ranks) starts in the stream.
  uint64_t row_start(uint64_t row);

 private:
  struct EpochOrder {
    uint64_t epoch = UINT64_MAX;
    uint64_t shift = 0;          // block 0's offset; the others' rise from it
    std::vector<uint32_t> rows;  // a permutation of the blocks 0 .. rows_per_epoch - 1
  };
  const EpochOrder& order_of(uint64_t epoch);

  std::shared_ptr<const TokenSource> source_;
  int64_t batch_size_, seq_len_;
  uint64_t seed_;
  int rank_, world_size_;
  uint64_t max_offset_ = 0, rows_per_epoch_ = 0;
  uint64_t position_ = 0;
  EpochOrder orders_[2];  // a batch may straddle two epochs
};

class BestFitBatchLoader final : public BatchLoader {
 public:
  // Throws std::invalid_argument when the stream holds no `bos` (see BestFitPacker).
  BestFitBatchLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size, int64_t seq_len, int64_t bos,
                     int rank = 0, int world_size = 1);
  Batch next(const torch::Device& device) override;
  torch::Tensor state() const override;
  void load_state(const torch::Tensor& state) override;
  bool state_shared_by_all_ranks() const override { return true; }
  std::string report() const override;
  std::optional<double> dropped_share() const override;
  const BestFitPacker& packer() const { return packer_; }

 private:
  std::shared_ptr<const TokenSource> source_;
  int64_t batch_size_, seq_len_;
  int rank_, world_size_;
  uint64_t position_ = 0;
  BestFitPacker packer_;
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
