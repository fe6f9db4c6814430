#pragma once
// One transformer block of the GPT family (model/gpt_config.h) and its parts: the config's norm, causal
// self-attention (LibTorch's scaled_dot_product_attention, which picks flash/memory-efficient kernels;
// grouped-query attention when there are fewer key/value heads; rotary positions applied to queries and
// keys), and the MLP (tanh-GELU, ReLU^2 or SwiGLU). The block has one forward, for training, evaluation
// and decoding alike: what differs between them travels in its BlockContext.
#include <torch/torch.h>

#include <optional>
#include <span>
#include <tuple>
#include <utility>

#include "model/activation_recompute.h"
#include "model/gpt_config.h"
#include "model/kv_cache.h"

namespace mygpt {

// What a new model's weights hold. random: the config's initialization (reset_parameters), drawn from the
// default generator exactly as a fresh training run always has. for_loading: uninitialized storage of the
// right shapes, no draw taken from any generator, for a model whose every weight is about to be overwritten
// from a file (a GPT-2 124M random init is ~200M draws and a page-zeroing pass, seconds at one thread).
// unallocated: parameters of the right shapes (CPU, fp32) with no memory at all and no draw, for a caller
// that gives each one memory of its own choosing before anything reads it (trainer/fully_sharded_model.h:
// --zero 3 keeps 1/N of each per rank). It is what Python builds on the meta device; here a meta tensor
// cannot become a CPU or CUDA one in place (set_data refuses another backend), and the modules hold their
// parameters by handle, so a parameter is a CPU tensor whose storage holds no bytes instead.
enum class WeightInit { random, for_loading, unallocated };

// A CPU fp32 tensor of `shape` whose storage holds no bytes (WeightInit::unallocated): only its shape may
// be read until a caller gives it memory (set_data).
torch::Tensor unallocated_tensor(at::IntArrayRef shape);

// A Linear layer whose weights hold what `init` says (for_loading: no draw from any generator).
torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias, WeightInit init = WeightInit::random);

// The config's norm over the last dimension: LayerNorm (bias optional, nanoGPT's bias=False) or
// RMSNorm, each with or without a learned gain (LibTorch's modules always have one).
class NormImpl : public torch::nn::Module {
 public:
  // cuda_kernel: a LayerNorm with weight and bias, on CUDA under 16-bit autocast, runs our kernels
  // (model/layer_norm_cuda.h) and returns the autocast dtype (GptRuntime::cuda_norm_kernel).
  NormImpl(int64_t width, const GptConfig& config, bool cuda_kernel = false);
  torch::Tensor forward(const torch::Tensor& x);
  // (x + branch, forward(x + branch)): a residual add and the norm after it, fused on CUDA where
  // cuda_kernel applies, the same two ops otherwise.
  std::pair<torch::Tensor, torch::Tensor> add_then_forward(const torch::Tensor& x, const torch::Tensor& branch);

  torch::Tensor weight, bias;  // undefined when the config has none

 private:
  std::optional<at::ScalarType> kernel_type(const torch::Tensor& x) const;

  int64_t width_;
  NormKind kind_;
  double eps_;
  bool cuda_kernel_;
};
TORCH_MODULE(Norm);

// cos and sin (T, head_size) of the rotary angles of T positions, in Llama's layout (each frequency
// twice: the first and second halves of a head rotate together). Undefined for learned positions.
struct RotaryAngles {
  torch::Tensor cos, sin;
  bool defined() const { return cos.defined(); }
};
RotaryAngles rotary_angles(const GptConfig& config, const torch::Tensor& positions);

// What a block's forward reads besides the residual stream.
struct BlockContext {
  RotaryAngles rope;  // of the input's positions; undefined for learned positions
  // Decoding: the input (B, T) continues the positions in the cache, attends to their keys and values
  // and its own (causally), and stores its own as layer `layer` (the cache advances once every layer
  // has read: GptImpl). No dropout, no recompute. Null: the input starts at position 0 and is all there is.
  KvCache* cache = nullptr;
  int64_t layer = 0;
  // Decoding several sequences at once, each at its own position (GptImpl::decode_rows): row i of the
  // input (B, 1) is the next position of the sequence whose keys and values row_caches[i] holds (a cache of
  // batch 1, not empty), and attends to that cache alone. Exclusive with `cache`; `layer` as for it.
  std::span<KvCache* const> row_caches{};
  // Whether this read continues positions already in the cache (a decoding step, not a first read).
  bool continues_cache() const { return (cache != nullptr && cache->length() > 0) || !row_caches.empty(); }
  // Whether this read records keys and values (no dropout, no recompute).
  bool caches() const { return cache != nullptr || !row_caches.empty(); }
};

// The residual stream between blocks. A block leaves its MLP's output `pending` rather than adding it,
// so that the next norm adds it in its own kernel (NormImpl::add_then_forward: one kernel on CUDA).
struct ResidualStream {
  torch::Tensor x;
  torch::Tensor pending{};  // undefined: nothing left to add
  torch::Tensor whole() const { return pending.defined() ? x + pending : x; }
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const GptConfig& config, WeightInit init = WeightInit::random, bool cuda_norm_kernel = false);
  // x (B, T, C) -> (B, T, C) at the positions context.rope gives, with context.cache as it says.
  torch::Tensor forward(const torch::Tensor& x, const BlockContext& context = {});

  torch::nn::Linear c_attn{nullptr};  // q, k and v projections in one matmul (q's heads, then k's, then v's)
  torch::nn::Linear c_proj{nullptr};  // output projection, a residual-stream writer
  Norm q_norm{nullptr}, k_norm{nullptr};  // per head, with qk_norm only

 private:
  // q (B, n_head, T, hs), k and v (B, n_kv_head, T, hs): projected, normalized, rotated.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> queries_keys_values(const torch::Tensor& qkv, int64_t B,
                                                                              int64_t T, const RotaryAngles& rope);
  // The attention of a step of several sequences (context.row_caches): each row against its own cache.
  torch::Tensor attend_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const BlockContext& context);
  int64_t n_head_, n_kv_head_, head_size_;
  double dropout_;
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config, WeightInit init = WeightInit::random);
  // context: a read with the KV cache has no dropout, and a decoding step's few rows take decode_linear.
  torch::Tensor forward(const torch::Tensor& x, const BlockContext& context = {});

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
  // recompute: what this block recomputes in backward instead of keeping (model/activation_recompute.h);
  // cuda_norm_kernel: its norms' CUDA kernel (NormImpl).
  BlockImpl(const GptConfig& config, WeightInit init = WeightInit::random, Recompute recompute = Recompute::none,
            bool cuda_norm_kernel = false);
  // The block's one forward: in = stream.x + stream.pending (added inside ln_1), then in + attn(ln_1(in))
  // and the MLP of ln_2 of that. Returns the stream with this block's MLP output pending, or whole where
  // the block recomputes in backward (what it keeps is its input). Training, evaluation and decoding
  // (context.cache) all come through here; recompute applies to reads without a cache.
  ResidualStream forward(const ResidualStream& stream, const BlockContext& context = {});

  Norm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  Norm ln_2{nullptr};
  Mlp mlp{nullptr};

 private:
  ResidualStream attention_then_mlp(const ResidualStream& stream, const BlockContext& context, Recompute recompute);
  Recompute recompute_;
};
TORCH_MODULE(Block);

}  // namespace mygpt
