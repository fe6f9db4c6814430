#pragma once
// Bits per byte as nanochat's evaluate_bpb computes it: the next-token losses (nats) of the targets and
// the bytes of text those targets stand for are summed separately, over every batch and every rank, and
// divided once: nats / (ln 2 * bytes). Targets that stand for no bytes (special tokens, padding rows)
// leave their nats out, so bpb compares models whose tokenizers differ; a loss does not.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "distributed/communicator.h"

namespace mygpt {

class BitsPerByte {
 public:
  // byte_counts: TextCodec::token_byte_counts(), padded with zeros to rows ids (the model's vocabulary).
  BitsPerByte(const std::vector<int64_t>& byte_counts, int64_t rows, const torch::Device& device);

  // Starts a pass: the sums back to zero.
  void reset();
  // Adds one batch: token_losses (B, T) fp32 of targets (B, T). Stays on the device (no wait).
  void add(const torch::Tensor& token_losses, const torch::Tensor& targets);
  // The sums of every rank (one all-reduce; every rank calls it) and their quotient: +inf without bytes.
  double combine(Communicator& comm);
  double nats() const { return nats_; }     // after combine
  double bytes() const { return bytes_; }   // after combine

 private:
  torch::Tensor byte_table_;  // (rows) int64 on the device
  torch::Tensor sums_;        // (2): nats, bytes; fp64 (fp32 on MPS, which has no fp64)
  double nats_ = 0, bytes_ = 0;
};

double bits_per_byte(double nats, double bytes);

}  // namespace mygpt
