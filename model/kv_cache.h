#pragma once
// The attention keys and values of the positions a GPT has already read. Generation keeps them so that
// each new token costs one position's work instead of a forward pass over the whole context again.
#include <torch/torch.h>

#include <utility>
#include <vector>

namespace mygpt {

// Per layer, keys and values (B, n_head, capacity, head_size) of positions 0..length()-1. Each layer's
// buffer is allocated whole on its first append (in the dtype the attention produces, which autocast
// may make bf16), so appending a token writes in place instead of growing a tensor per token.
class KvCache {
 public:
  KvCache(int64_t layers, int64_t capacity);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  bool full() const { return length_ == capacity_; }
  // Forgets every position (the buffers stay allocated for the next read).
  void clear() { length_ = 0; }

  // Stores keys and values (B, H, T, hs) of `layer` at positions length()..length()+T-1 and returns
  // views of all that layer's keys and values so far, (B, H, length()+T, hs). std::logic_error when
  // they would pass the capacity or their batch or shape differs from what the cache holds.
  std::pair<torch::Tensor, torch::Tensor> append(int64_t layer, const torch::Tensor& keys,
                                                 const torch::Tensor& values);
  // Called once every layer has appended `positions` new ones.
  void advance(int64_t positions);

 private:
  int64_t capacity_;
  int64_t length_ = 0;
  std::vector<torch::Tensor> keys_, values_;
};

}  // namespace mygpt
