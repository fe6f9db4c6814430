#pragma once
// Batches of conversations for supervised fine-tuning: one conversation per row, right-padded to T.
//
// Row i of a batch holds x = ids[0 .. L-2] and y = ids[1 .. L-1] of one rendered conversation (L <= T + 1
// ids, cut by the reader), and y is kUntrainedTarget wherever the token is not an assistant token
// (prompt, user turns, special tokens before the reply) and on every padding position. So padding never
// reaches the loss; and it never reaches the attention of a real token either: padding is on the right
// and attention is causal, so a real position only attends to the positions before it, all real.
//
// Batch k of the whole run (all ranks) is rows k*B .. k*B+B-1 of the conversations in an order drawn
// per epoch from (seed, epoch) (or the file's order, unshuffled); rank r of W reads batch position + r
// and every rank advances the position by W, as ShardedBatchLoader does, so W ranks x A micro-batches
// read exactly the batches of 1 rank x W*A. The state is that one position, the same on every rank.
#include <cstdint>
#include <memory>
#include <vector>

#include "dataloader/batch_loader.h"
#include "dataloader/chat_format.h"

namespace mygpt {

// y's value where nothing is trained (the model's masked loss skips negative targets).
inline constexpr int64_t kUntrainedTarget = -1;

class ChatBatchLoader final : public BatchLoader {
 public:
  // pad_id fills x after a conversation's end (any id of the vocabulary: nothing attends to it, nothing
  // is trained on it). Conversations must hold 2 .. seq_len + 1 ids (std::invalid_argument otherwise).
  ChatBatchLoader(std::shared_ptr<const std::vector<RenderedChat>> conversations, int64_t batch_size,
                  int64_t seq_len, int64_t pad_id, bool shuffle, uint64_t seed, int rank = 0, int world_size = 1);
  Batch next(const torch::Device& device) override;
  torch::Tensor state() const override;
  void load_state(const torch::Tensor& state) override;
  bool state_shared_by_all_ranks() const override { return true; }

  void reset() { position_ = 0; }
  uint64_t position() const { return position_; }
  // Batches one pass over the conversations fills (the last may be short: it wraps to the next epoch).
  uint64_t batches_per_epoch() const;
  // The conversation of row `row` of the whole run (all epochs, all ranks).
  size_t conversation_of_row(uint64_t row);

 private:
  const std::vector<uint32_t>& order_of(uint64_t epoch);

  std::shared_ptr<const std::vector<RenderedChat>> conversations_;
  int64_t batch_size_, seq_len_, pad_id_;
  bool shuffle_;
  uint64_t seed_;
  int rank_, world_size_;
  uint64_t position_ = 0;
  uint64_t order_epoch_ = UINT64_MAX;
  std::vector<uint32_t> order_;
};

}  // namespace mygpt
