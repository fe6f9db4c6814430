#pragma once
// The language-model head and its cross-entropy, computed a chunk of rows at a time so that the
// (rows x vocab) logits never exist all at once. For GPT-2's vocabulary the fp32 logits, their
// log-softmax and their gradient are each B*T*50304*4 bytes (13 GB at B=32, T=1024); here only one
// chunk's worth lives at a time. When a gradient is wanted, each chunk's share of the gradients with
// respect to the hidden states and the weight is taken in the forward, while its logits exist, so
// nothing vocabulary-sized per row is kept for (or recomputed in) the backward.
//
// Numerics follow the plain path `cross_entropy(linear(hidden, weight).float(), targets)`: under
// autocast the matmuls run in the autocast dtype (bf16) while logsumexp, softmax and the loss stay
// fp32; without autocast everything runs in the inputs' dtype.
#include <torch/torch.h>

namespace mygpt {

// Rows per chunk for a head of vocab_size x n_embd on a device, chosen by memory, not by a magic
// count: a chunk's fp32 logits stay near 64 MiB on a CPU (cache-sized passes) and near 1 GiB on a GPU
// (fewer, larger matmuls), unless that is fewer than n_embd rows (see the .cpp for why).
int64_t lm_loss_chunk_rows(int64_t vocab_size, int64_t n_embd, c10::DeviceType device = c10::DeviceType::CPU);

// How the chunked loss runs. The defaults are the portable path (ATen ops, memory-sized chunks).
struct LmLossOptions {
  int64_t chunk_rows = 0;    // rows per chunk; <= 0 picks lm_loss_chunk_rows for the inputs' device
  bool cuda_kernel = false;  // CUDA inputs: one fused kernel per chunk for softmax, loss and gradient
                             // (model/cuda/lm_loss_kernel.cu), and the head's fp32 weight gradient
                             // accumulated by the 16-bit matmul itself; other devices ignore it
};

// Mean over rows of cross_entropy(hidden @ weight^T, targets). hidden (N, C), weight (V, C) (the
// head: the tied token embedding or its own), targets (N) int64 in [0, V). Differentiable with respect to hidden and
// weight. Returns a 0-dim fp32 tensor. logit_softcap > 0: the logits are cap * tanh(logits / cap) (in
// fp32) before the cross-entropy, as nanochat's head computes them; 0: no cap.
torch::Tensor chunked_lm_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                              const LmLossOptions& options = {}, double logit_softcap = 0.0);

// The per-row cross-entropy (N) fp32 of the same head, for evaluation: no gradient flows through it.
torch::Tensor chunked_lm_token_losses(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, const LmLossOptions& options = {},
                                      double logit_softcap = 0.0);

}  // namespace mygpt
