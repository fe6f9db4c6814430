#pragma once
// The GPT-2 network: token + learned position embeddings, pre-LayerNorm transformer blocks with causal
// self-attention (LibTorch's scaled_dot_product_attention, which picks flash/memory-efficient kernels),
// a tanh-GELU MLP, a final LayerNorm, and an output head tied to the token embedding.
#include <torch/torch.h>

#include <vector>

#include "model/chunked_lm_loss.h"
#include "model/activation_recompute.h"
#include "model/gpt_config.h"
#include "model/kv_cache.h"

namespace mygpt {

// LayerNorm whose bias is optional (nanoGPT's bias=False variant); LibTorch's module always has one.
class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t width, bool bias);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight, bias;  // bias undefined when disabled
};
TORCH_MODULE(LayerNorm);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  // x (B, T, C) at the positions after those in `cache`: attends to the cached keys and values and its
  // own (causally), and stores its own in the cache as `layer`. No dropout (generation only).
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, int64_t layer);

  torch::nn::Linear c_attn{nullptr};  // q, k and v projections in one matmul
  torch::nn::Linear c_proj{nullptr};  // output projection, a residual-stream writer

 private:
  int64_t n_head_;
  double dropout_;
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  // forward() in a read with the KV cache (no dropout: generation only); continues_cache: the cache
  // already held positions before this read (a decoding step rather than a first read).
  torch::Tensor forward_cached(const torch::Tensor& x, bool continues_cache);

  torch::nn::Linear c_fc{nullptr};
  torch::nn::Linear c_proj{nullptr};  // a residual-stream writer

 private:
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GptConfig& config);
  torch::Tensor forward(torch::Tensor x);
  torch::Tensor forward_cached(torch::Tensor x, KvCache& cache, int64_t layer);

  LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  LayerNorm ln_2{nullptr};
  Mlp mlp{nullptr};
  Recompute recompute = Recompute::none;  // set through GptImpl::set_recompute
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptConfig& config);

  // idx: (B, T) int64 token ids with T <= block_size. Returns logits (B, T, vocab_size).
  torch::Tensor forward(const torch::Tensor& idx);
  // The final LayerNorm's output (B, T, n_embd): what the tied head turns into logits.
  torch::Tensor hidden_states(const torch::Tensor& idx);
  // Logits of the last position only (B, vocab_size), all that sampling needs.
  torch::Tensor last_token_logits(const torch::Tensor& idx);
  // The same logits when idx (B, T) continues the positions already in `cache` (an empty cache: idx
  // starts at position 0): only idx's positions are computed, and their keys and values join the cache.
  // cache.length() + T must not pass the block size (std::logic_error). For generation: eval mode.
  torch::Tensor last_token_logits(const torch::Tensor& idx, KvCache& cache);
  // A cache sized for this model (block_size positions).
  KvCache make_kv_cache() const { return KvCache(config_.n_layer, config_.block_size); }
  // Mean cross-entropy of the next-token prediction against targets (B, T). vocab_limit > 0 scores
  // over the first vocab_limit ids only: the tokenizer's tokens without the padding rows, as a sampler
  // with that limit (and an exported, unpadded model) sees the distribution.
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit = 0);
  // Per-position cross-entropy (B, T), fp32, for evaluation (no gradient).
  torch::Tensor token_losses(const torch::Tensor& idx, const torch::Tensor& targets);

  // Fused loss (default on): loss() and token_losses() run the head and the cross-entropy in chunks
  // of rows (model/chunked_lm_loss.h) and never hold the (B*T, vocab) logits; off computes the full
  // logits as forward() does (kept for comparison). A runtime setting, not part of the config.
  void set_fused_loss(bool enabled) { fused_loss_ = enabled; }
  bool fused_loss() const { return fused_loss_; }
  // How the fused loss runs: chunk size, the CUDA kernel (model/chunked_lm_loss.h).
  void set_loss_options(const LmLossOptions& options) { loss_options_ = options; }
  const LmLossOptions& loss_options() const { return loss_options_; }
  // What each block recomputes in backward instead of keeping (model/activation_recompute.h): less
  // memory for activations, one more forward of that part. Training only; a runtime setting too.
  void set_recompute(Recompute mode);

  const GptConfig& config() const { return config_; }
  int64_t num_parameters() const;

  // AdamW groups: weight decay applies to matrices and embeddings (dim >= 2) only; biases and
  // LayerNorm gains stay undecayed, as in GPT-2 / nanoGPT.
  std::vector<torch::Tensor> decay_parameters() const;
  std::vector<torch::Tensor> no_decay_parameters() const;

  // Re-draws every weight the GPT-2 way: N(0, 0.02), residual writers scaled by 1/sqrt(2 n_layer),
  // zero biases, unit LayerNorm gains. Uses the current default generator.
  void reset_parameters();

  torch::nn::Embedding wte{nullptr};  // also the output head (weight tying)
  torch::nn::Embedding wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};

 private:
  GptConfig config_;
  bool fused_loss_ = true;
  LmLossOptions loss_options_;
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace mygpt
