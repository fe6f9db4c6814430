#pragma once
// The GPT family (model/gpt_config.h): token embedding (+ learned positions, or rotary ones applied to
// queries and keys), pre-norm transformer blocks with causal self-attention (LibTorch's
// scaled_dot_product_attention, which picks flash/memory-efficient kernels; grouped-query attention
// when there are fewer key/value heads), an MLP (tanh-GELU, ReLU^2 or SwiGLU), a final norm, and an
// output head tied to the token embedding or its own, optionally soft-capped. GPT-2 is the member with
// every choice at its default; its arithmetic is what it was before the family existed.
#include <torch/torch.h>

#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "model/chunked_lm_loss.h"
#include "model/activation_recompute.h"
#include "model/gpt_config.h"
#include "model/kv_cache.h"

namespace mygpt {

// What a new model's weights hold. random: the config's initialization (reset_parameters), drawn from the
// default generator exactly as a fresh training run always has. for_loading: uninitialized storage of the
// right shapes, no draw taken from any generator, for a model whose every weight is about to be overwritten
// from a file (a GPT-2 124M random init is ~200M draws and a page-zeroing pass, seconds at one thread).
enum class WeightInit { random, for_loading };

// The config's norm over the last dimension: LayerNorm (bias optional, nanoGPT's bias=False) or
// RMSNorm, each with or without a learned gain (LibTorch's modules always have one).
class NormImpl : public torch::nn::Module {
 public:
  NormImpl(int64_t width, const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  // (x + branch, forward(x + branch)): a residual add and the norm after it, fused on CUDA where
  // cuda_kernel applies, the same two ops otherwise.
  std::pair<torch::Tensor, torch::Tensor> add_then_forward(const torch::Tensor& x, const torch::Tensor& branch);

  torch::Tensor weight, bias;  // undefined when the config has none
  // A LayerNorm with weight and bias, on CUDA under 16-bit autocast, runs our kernels
  // (model/layer_norm_cuda.h) and returns the autocast dtype; set through GptImpl::set_cuda_norm_kernel.
  bool cuda_kernel = false;

 private:
  std::optional<at::ScalarType> kernel_type(const torch::Tensor& x) const;

  int64_t width_;
  NormKind kind_;
  double eps_;
};
TORCH_MODULE(Norm);

// cos and sin (T, head_size) of the rotary angles of T positions, in Llama's layout (each frequency
// twice: the first and second halves of a head rotate together). Undefined for learned positions.
struct RotaryAngles {
  torch::Tensor cos, sin;
  bool defined() const { return cos.defined(); }
};
RotaryAngles rotary_angles(const GptConfig& config, const torch::Tensor& positions);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config, WeightInit init = WeightInit::random);
  torch::Tensor forward(const torch::Tensor& x, const RotaryAngles& rope = {});
  // x (B, T, C) at the positions after those in `cache` (rope: the angles of those positions): attends
  // to the cached keys and values and its own (causally), and stores its own in the cache as `layer`.
  // No dropout (generation only).
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, int64_t layer, const RotaryAngles& rope = {});

  torch::nn::Linear c_attn{nullptr};  // q, k and v projections in one matmul (q's heads, then k's, then v's)
  torch::nn::Linear c_proj{nullptr};  // output projection, a residual-stream writer
  Norm q_norm{nullptr}, k_norm{nullptr};  // per head, with qk_norm only

 private:
  // q (B, n_head, T, hs), k and v (B, n_kv_head, T, hs): projected, normalized, rotated.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> queries_keys_values(const torch::Tensor& qkv, int64_t B,
                                                                              int64_t T, const RotaryAngles& rope);
  int64_t n_head_, n_kv_head_, head_size_;
  double dropout_;
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config, WeightInit init = WeightInit::random);
  torch::Tensor forward(const torch::Tensor& x);
  // forward() in a read with the KV cache (no dropout: generation only); continues_cache: the cache
  // already held positions before this read (a decoding step rather than a first read).
  torch::Tensor forward_cached(const torch::Tensor& x, bool continues_cache);

  torch::nn::Linear c_fc{nullptr};    // input projection (SwiGLU: gate rows, then up rows)
  torch::nn::Linear c_proj{nullptr};  // a residual-stream writer

 private:
  torch::Tensor activation(const torch::Tensor& h) const;
  MlpKind kind_;
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GptConfig& config, WeightInit init = WeightInit::random);
  torch::Tensor forward(torch::Tensor x, const RotaryAngles& rope = {});
  // The block with the MLP's residual add left to the norm after it: `pending` (undefined for the first
  // block) is the previous block's MLP output, added to x inside ln_1 (NormImpl::add_then_forward: one
  // kernel on CUDA, as ln_2 adds the attention's); returns the residual stream without this block's MLP
  // output, and that output, which the next block's ln_1 (or the model, before ln_f) adds.
  std::pair<torch::Tensor, torch::Tensor> forward_deferred(const torch::Tensor& x, const torch::Tensor& pending,
                                                           const RotaryAngles& rope = {});
  torch::Tensor forward_cached(torch::Tensor x, KvCache& cache, int64_t layer, const RotaryAngles& rope = {});

  Norm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  Norm ln_2{nullptr};
  Mlp mlp{nullptr};
  Recompute recompute = Recompute::none;  // set through GptImpl::set_recompute
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptConfig& config, WeightInit init = WeightInit::random);
  // How this model's weights were made (not changed by a later load or reset_parameters).
  WeightInit weight_init() const { return weight_init_; }

  // idx: (B, T) int64 token ids with T <= block_size. Returns logits (B, T, vocab_size), soft-capped
  // (in fp32) where the config has a cap.
  torch::Tensor forward(const torch::Tensor& idx);
  // The final norm's output (B, T, n_embd): what the head turns into logits.
  torch::Tensor hidden_states(const torch::Tensor& idx);
  // Logits of the last position only (B, vocab_size), all that sampling needs.
  torch::Tensor last_token_logits(const torch::Tensor& idx);
  // The same logits when idx (B, T) continues the positions already in `cache` (an empty cache: idx
  // starts at position 0): only idx's positions are computed, and their keys and values join the cache.
  // cache.length() + T must not pass the block size (std::logic_error). For generation: eval mode.
  torch::Tensor last_token_logits(const torch::Tensor& idx, KvCache& cache);
  // A cache sized for this model (block_size positions).
  KvCache make_kv_cache() const { return KvCache(config_.n_layer, config_.block_size); }
  // The output head's (vocab_size, n_embd) weight: the token embedding's when tied, lm_head's otherwise.
  const torch::Tensor& head_weight() const { return config_.tie_head ? wte->weight : lm_head->weight; }
  // Mean cross-entropy of the next-token prediction against targets (B, T). vocab_limit > 0 scores
  // over the first vocab_limit ids only: the tokenizer's tokens without the padding rows, as a sampler
  // with that limit (and an exported, unpadded model) sees the distribution.
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit = 0);
  // Fine-tuning's loss: the SUM of the cross-entropy over the positions whose target is not negative (a
  // negative target is not trained: a prompt's, a user's or padding), 0-dim fp32, for the caller to
  // divide by the count of trained targets of the whole batch (all micro-batches, all ranks). Only the
  // trained rows go through the head. With none, the loss is a zero that still reaches every parameter,
  // so that every gradient is produced (and synchronized) as in any other micro-step.
  torch::Tensor masked_loss_sum(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit = 0);
  // Per-position cross-entropy (B, T), fp32, for evaluation (no gradient); vocab_limit as for loss().
  torch::Tensor token_losses(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit = 0);
  // Logits (N, vocab_limit or every row) of hidden rows (N, n_embd) taken from hidden_states(), soft-capped
  // as forward()'s: for scoring only the positions an evaluation reads.
  torch::Tensor logits_of_rows(const torch::Tensor& hidden_rows, int64_t vocab_limit = 0);

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
  // The blocks' LayerNorms' CUDA kernel under 16-bit autocast (NormImpl::cuda_kernel); a runtime setting.
  void set_cuda_norm_kernel(bool enabled);

  const GptConfig& config() const { return config_; }
  int64_t num_parameters() const;

  // AdamW groups: weight decay applies to matrices and embeddings (dim >= 2) only; biases and
  // norm gains stay undecayed, as in GPT-2 / nanoGPT.
  std::vector<torch::Tensor> decay_parameters() const;
  std::vector<torch::Tensor> no_decay_parameters() const;

  // Re-draws every weight by the config's init. gpt2: N(0, 0.02), residual writers scaled by
  // 1/sqrt(2 n_layer), zero biases, unit norm gains. nanochat (karpathy/nanochat's init_weights): token
  // embedding N(0, 1), head N(0, 0.001), the blocks' input projections uniform with std 1/sqrt(n_embd),
  // the residual writers (attention and MLP output projections) zero. Uses the default generator.
  void reset_parameters();

  torch::nn::Embedding wte{nullptr};  // also the output head when tied
  torch::nn::Embedding wpe{nullptr};  // learned positions only
  Norm ln_e{nullptr};                 // embedding_norm only
  torch::nn::ModuleList h{nullptr};
  Norm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};  // untied head only

 private:
  GptConfig config_;
  WeightInit weight_init_;
  bool fused_loss_ = true;
  LmLossOptions loss_options_;
  torch::nn::Dropout drop_{nullptr};
  // Embeddings of tokens at these positions (+ their learned positions; the rotary angles of them).
  std::pair<torch::Tensor, RotaryAngles> embed(const torch::Tensor& idx, int64_t first_position);
  // cap * tanh(logits / cap) in fp32 where the config has a cap; logits unchanged otherwise.
  torch::Tensor soft_capped(const torch::Tensor& logits) const;
};
TORCH_MODULE(Gpt);

}  // namespace mygpt
