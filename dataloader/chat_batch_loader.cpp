#include "dataloader/chat_batch_loader.h"

#include <numeric>
#include <random>
#include <stdexcept>

namespace mygpt {

ChatBatchLoader::ChatBatchLoader(std::shared_ptr<const std::vector<RenderedChat>> conversations, int64_t batch_size,
                                 int64_t seq_len, int64_t pad_id, bool shuffle, uint64_t seed, int rank,
                                 int world_size)
    : conversations_(std::move(conversations)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      pad_id_(pad_id),
      shuffle_(shuffle),
      seed_(seed),
      rank_(rank),
      world_size_(world_size) {
  if (!conversations_ || conversations_->empty()) throw std::invalid_argument("no conversations to batch");
  if (conversations_->size() > UINT32_MAX) throw std::invalid_argument("more than 2^32 conversations");
  for (const RenderedChat& c : *conversations_) {
    if (c.ids.size() < 2 || static_cast<int64_t>(c.ids.size()) > seq_len_ + 1 || c.trained.size() != c.ids.size()) {
      throw std::invalid_argument("a conversation of " + std::to_string(c.ids.size()) +
                                  " ids does not fit a row of --seq-len " + std::to_string(seq_len_));
    }
  }
}

const std::vector<uint32_t>& ChatBatchLoader::order_of(uint64_t epoch) {
  if (epoch == order_epoch_) return order_;
  order_.resize(conversations_->size());
  std::iota(order_.begin(), order_.end(), 0U);
  if (shuffle_) {
    // Fisher-Yates by hand: std::shuffle's steps differ between standard libraries, and a run must read
    // the same order wherever it resumes.
    std::mt19937_64 generator(seed_ * 1000003ULL + epoch);
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[generator() % (i + 1)]);
  }
  order_epoch_ = epoch;
  return order_;
}

size_t ChatBatchLoader::conversation_of_row(uint64_t row) {
  const uint64_t n = conversations_->size();
  return order_of(row / n)[row % n];
}

uint64_t ChatBatchLoader::batches_per_epoch() const {
  const auto b = static_cast<uint64_t>(batch_size_);
  return (conversations_->size() + b - 1) / b;
}

Batch ChatBatchLoader::next(const torch::Device& device) {
  const uint64_t batch = position_ + static_cast<uint64_t>(rank_);
  position_ += static_cast<uint64_t>(world_size_);
  auto x = torch::full({batch_size_, seq_len_}, pad_id_, torch::kLong);
  auto y = torch::full({batch_size_, seq_len_}, kUntrainedTarget, torch::kLong);
  auto* xs = x.data_ptr<int64_t>();
  auto* ys = y.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch_size_; ++b) {
    const RenderedChat& c = (*conversations_)[conversation_of_row(batch * static_cast<uint64_t>(batch_size_) +
                                                                  static_cast<uint64_t>(b))];
    for (size_t t = 0; t + 1 < c.ids.size(); ++t) {
      xs[b * seq_len_ + static_cast<int64_t>(t)] = c.ids[t];
      if (c.trained[t + 1]) ys[b * seq_len_ + static_cast<int64_t>(t)] = c.ids[t + 1];
    }
  }
  if (device.is_cpu()) return {x, y};
  if (device.is_cuda()) {  // pinned: the copy runs asynchronously
    x = x.pin_memory();
    y = y.pin_memory();
  }
  return {x.to(device, /*non_blocking=*/true), y.to(device, /*non_blocking=*/true)};
}

torch::Tensor ChatBatchLoader::state() const {
  return torch::tensor({static_cast<int64_t>(position_)}, torch::kLong);
}

void ChatBatchLoader::load_state(const torch::Tensor& state) {
  if (state.numel() != 1 || state.scalar_type() != torch::kLong || state.item<int64_t>() < 0) {
    throw std::invalid_argument("the conversation loader's state is not one position");
  }
  position_ = static_cast<uint64_t>(state.item<int64_t>());
}

}  // namespace mygpt
