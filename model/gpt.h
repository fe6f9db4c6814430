#pragma once
// The GPT family (model/gpt_config.h): token embedding (+ learned positions, or rotary ones applied to
// queries and keys), pre-norm transformer blocks (model/transformer_block.h), a final norm, and an
// output head tied to the token embedding or its own, optionally soft-capped. GPT-2 is the member with
// every choice at its default; its arithmetic is what it was before the family existed. One forward
// serves training, evaluation and decoding (a KV cache), as nanochat's forward(idx, targets, kv_cache)
// does: logits from forward(), the cross-entropy from loss().
#include <torch/torch.h>

#include <span>
#include <functional>
#include <utility>
#include <vector>

#include "model/activation_recompute.h"
#include "model/chunked_lm_loss.h"
#include "model/gpt_config.h"
#include "model/kv_cache.h"
#include "model/transformer_block.h"

namespace mygpt {

// How a model computes, not what: none of it is part of the config or of a checkpoint, and the defaults
// are what a model built without them does (launcher/run_builder.cpp sets them from train's options).
struct GptRuntime {
  // Fused loss: loss() runs the head and the cross-entropy in chunks of rows (model/chunked_lm_loss.h)
  // and never holds the (B*T, vocab) logits; off computes the full logits as forward() does (kept for
  // comparison).
  bool fused_loss = true;
  LmLossOptions loss{};  // how the fused loss runs: chunk size, the CUDA kernel
  // What each block recomputes in backward instead of keeping (model/activation_recompute.h): less memory
  // for activations, one more forward of that part. Training only.
  Recompute recompute = Recompute::none;
  // The blocks' LayerNorms' CUDA kernel under 16-bit autocast (NormImpl). The blocks' norms only: their
  // outputs feed 16-bit matmuls whose input gradients come back 16-bit anyway. The final norm's gradient
  // comes from the loss in fp32, and under fp16 would lose range.
  bool cuda_norm_kernel = false;
};

// How loss() reduces the per-position cross-entropy.
enum class LossReduction {
  mean,  // over every position (every target trained): pretraining's loss
  // The SUM over the positions whose target is not negative (a negative target is not trained: a prompt's,
  // a user's or padding), for the caller to divide by the count of trained targets of the whole batch
  // (all micro-batches, all ranks): fine-tuning's loss. Only the trained rows go through the head. With
  // none, the loss is a zero that still reaches every parameter, so that every gradient is produced (and
  // synchronized) as in any other micro-step.
  sum,
  none,  // per position (B, T), for evaluation: no gradient
};

// Which logits forward() returns.
struct ForwardOptions {
  // Decoding: idx (B, T) continues the positions already in the cache (an empty cache: idx starts at
  // position 0); only idx's positions are computed, and their keys and values join the cache.
  // cache->length() + T must not pass the block size (std::logic_error). For generation: eval mode.
  KvCache* cache = nullptr;
  bool last_position_only = false;  // (B, vocab): all that sampling needs
  // Flat indices (N) int64 into the (B*T) positions: their logits (N, vocab) only, for scoring just the
  // positions an evaluation reads. Undefined: every position, (B, T, vocab).
  torch::Tensor positions{};
  // > 0: logits over the first vocab_limit ids only (the tokenizer's tokens without the padding rows).
  int64_t vocab_limit = 0;
};

// Callbacks around the model's units, for a caller that keeps their parameters elsewhere between uses
// (trainer/ shards them across ranks with --zero 3; model/ knows nothing of that). Units: 0 the
// embeddings, 1..n_layer the blocks, n_layer + 1 the final norm, n_layer + 2 the head (whose weight is the
// token embedding's when tied). before(unit) runs before a forward reads the unit's parameters; after(unit,
// outputs) once the unit has made its outputs (an undefined tensor among them stays as it is). Each
// forward and loss() goes through every unit in that order, exactly once.
struct UnitHooks {
  std::function<void(int64_t unit)> before;
  std::function<void(int64_t unit, const std::vector<torch::Tensor>& outputs)> after;
};

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptConfig& config, WeightInit init = WeightInit::random, const GptRuntime& runtime = {});
  GptImpl(const GptConfig& config, const GptRuntime& runtime) : GptImpl(config, WeightInit::random, runtime) {}
  // How this model's weights were made (not changed by a later load or reset_parameters).
  WeightInit weight_init() const { return weight_init_; }
  const GptRuntime& runtime() const { return runtime_; }

  // idx: (B, T) int64 token ids with T <= block_size. Returns logits (B, T, vocab_size), or what options
  // ask for, soft-capped (in fp32) where the config has a cap. Weight tying (GPT-2): the output head reuses
  // the token embedding matrix (saves 38M parameters for GPT-2 and helps quality, Press & Wolf 2017); the
  // newer members keep a head of their own.
  torch::Tensor forward(const torch::Tensor& idx, const ForwardOptions& options = {});
  // One decoding step of several sequences, each at its own position (continuous batching): tokens (B)
  // int64, row i the next token of the sequence whose keys and values caches[i] holds (a cache of batch 1
  // with at least one position and room for this one). Returns logits (B, vocab_size), or (B, vocab_limit)
  // where vocab_limit > 0, as forward() does; each cache advances by one. The rows share every weight read
  // (the linears), and on the CPU each row's logits are bit for bit those of forward() on that sequence
  // alone with its cache. Eval mode, no gradient.
  torch::Tensor decode_rows(const torch::Tensor& tokens, std::span<KvCache* const> caches, int64_t vocab_limit = 0);
  // The cross-entropy of the next-token prediction against targets (B, T), 0-dim fp32 or (B, T) fp32 by
  // `reduction`. vocab_limit > 0 scores over the first vocab_limit ids only: the tokenizer's tokens without
  // the padding rows, as a sampler with that limit (and an exported, unpadded model) sees the distribution.
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets,
                     LossReduction reduction = LossReduction::mean, int64_t vocab_limit = 0);

  // A cache sized for this model (block_size positions).
  KvCache make_kv_cache() const { return KvCache(config_.n_layer, config_.block_size); }
  // The output head's (vocab_size, n_embd) weight: the token embedding's when tied, lm_head's otherwise.
  const torch::Tensor& head_weight() const { return config_.tie_head ? wte->weight : lm_head->weight; }

  const GptConfig& config() const { return config_; }
  int64_t num_parameters() const;

  void set_unit_hooks(UnitHooks hooks) { unit_hooks_ = std::move(hooks); }
  int64_t head_unit() const { return config_.n_layer + 2; }

  // AdamW groups: weight decay applies to matrices and embeddings (dim >= 2) only; biases and
  // norm gains stay undecayed, as in GPT-2 / nanoGPT.
  std::vector<torch::Tensor> decay_parameters() const;
  std::vector<torch::Tensor> no_decay_parameters() const;

  // Re-draws every weight by the config's init. gpt2: N(0, 0.02), residual writers scaled by
  // 1/sqrt(2 n_layer), zero biases, unit norm gains. nanochat (karpathy/nanochat's init_weights): token
  // embedding N(0, 1), head N(0, 0.001), the blocks' input projections uniform with std 1/sqrt(n_embd),
  // the residual writers (attention and MLP output projections) zero. Uses the default generator.
  void reset_parameters();
  // The values a random model (WeightInit::random) of this config starts with, one parameter at a time:
  // take(name, value) for each, value a CPU tensor of its own that lives until take returns, drawn from the
  // default generator in the very order a random model's constructor draws them, which leaves that
  // generator where building a random model leaves it. For a model built WeightInit::unallocated whose
  // caller keeps only a part of each (--zero 3's shards): never more than one whole parameter at a time.
  void for_each_initial_value(const std::function<void(const std::string&, const torch::Tensor&)>& take) const;

  torch::nn::Embedding wte{nullptr};  // also the output head when tied
  torch::nn::Embedding wpe{nullptr};  // learned positions only
  Norm ln_e{nullptr};                 // embedding_norm only
  torch::nn::ModuleList h{nullptr};
  Norm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};  // untied head only

 private:
  GptConfig config_;
  WeightInit weight_init_;
  GptRuntime runtime_;
  torch::nn::Dropout drop_{nullptr};
  UnitHooks unit_hooks_;
  // One parameter's share of reset_parameters: its name and the draw that fills it.
  struct InitStep {
    std::string name;
    std::function<void(torch::Tensor&)> draw;
  };
  std::vector<InitStep> init_steps() const;
  void unit_begins(int64_t unit) const {
    if (unit_hooks_.before) unit_hooks_.before(unit);
  }
  void unit_ends(int64_t unit, const std::vector<torch::Tensor>& outputs) const {
    if (unit_hooks_.after) unit_hooks_.after(unit, outputs);
  }
  // Embeddings of tokens at these positions (+ their learned positions; the rotary angles of them).
  std::pair<torch::Tensor, RotaryAngles> embed(const torch::Tensor& idx, int64_t first_position);
  // The residual stream after the last block (B, T, n_embd), before the final norm; with a cache, of
  // idx's positions after those in it (which it then holds as well).
  torch::Tensor last_block_output(const torch::Tensor& idx, KvCache* cache);
  // std::logic_error naming `what` when vocab_limit is outside the vocabulary (0: every row).
  void check_vocab_limit(int64_t vocab_limit, const char* what) const;
  // The head's rows of the first vocab_limit ids (every row at 0); std::logic_error naming `what` outside.
  torch::Tensor head_rows(int64_t vocab_limit, const char* what) const;
  // loss() after the final norm: the head and its cross-entropy, reduced as asked.
  torch::Tensor head_loss(const torch::Tensor& hidden, const torch::Tensor& head, const torch::Tensor& targets,
                          LossReduction reduction);
  // The head's cross-entropy of the final norm's output against targets (fused or over full logits).
  torch::Tensor head_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& head,
                                   const torch::Tensor& targets, LossReduction reduction);
  // cap * tanh(logits / cap) in fp32 where the config has a cap; logits unchanged otherwise.
  torch::Tensor soft_capped(const torch::Tensor& logits) const;
};
TORCH_MODULE(Gpt);

}  // namespace mygpt
