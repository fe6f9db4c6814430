#include "model/transformer_block.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>
#include <vector>

#include "model/decode_linear.h"
#include "model/gelu_tanh_cpu.h"
#include "model/layer_norm_cuda.h"

namespace mygpt {

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias, WeightInit init) {
  if (init == WeightInit::random) return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
  // LibTorch's Linear always runs its kaiming init in its constructor; built with no rows it draws nothing
  // (uniform_ over zero elements), and then takes uninitialized storage of the real shape.
  torch::nn::Linear linear(torch::nn::LinearOptions(in, 0).bias(bias));
  linear->options.out_features(out);
  torch::NoGradGuard no_grad;
  auto make = [init](at::IntArrayRef shape) {
    return init == WeightInit::unallocated ? unallocated_tensor(shape) : torch::empty(shape);
  };
  linear->weight.set_data(make({out, in}));
  if (bias) linear->bias.set_data(make({out}));
  return linear;
}

torch::Tensor unallocated_tensor(at::IntArrayRef shape) {
  torch::Tensor tensor = torch::empty({0});
  // Sizes set on the tensor, not through resize_: the storage stays empty.
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return tensor;
}

namespace {

// A Linear layer's product through ATen's linear, not the module's forward: the C++ frontend's
// torch::nn::Linear multiplies and then adds the bias in place, which under bf16 autocast adds an fp32 bias
// into a bf16 product through ATen's slow mixed-dtype kernel (on an H100: 48 such adds, 12 of a GPT-2 step's
// 89 ms, evidence/gpu-runs/2026-11-26-h100-call4); ATen's linear fuses the bias into the matrix product.
// In a read that continues a KV cache, the few rows of a decoding step take decode_linear on a CPU
// (model/decode_linear.h); every other read, a first one with the cache included, is ATen's linear.
// A step of several sequences (row caches) takes row_invariant_linear: each row as it is decoded alone.
torch::Tensor linear_of(const torch::nn::Linear& layer, const torch::Tensor& x, const BlockContext& context) {
  if (!context.row_caches.empty()) return row_invariant_linear(x, layer->weight, layer->bias);
  return decoding_linear(x, layer->weight, layer->bias, context.continues_cache());
}

}  // namespace

NormImpl::NormImpl(int64_t width, const GptConfig& config, bool cuda_kernel)
    : width_(width), kind_(config.norm), eps_(config.norm_eps), cuda_kernel_(cuda_kernel) {
  if (config.norm_weight) weight = register_parameter("weight", torch::ones({width}));
  if (config.bias && kind_ == NormKind::layernorm) bias = register_parameter("bias", torch::zeros({width}));
}

// Under autocast ATen's LayerNorm runs in fp32 and the matmul after it casts the output to 16 bits; the
// kernel writes those 16 bits directly (the same values to fp32 rounding). The dtype it writes, where it
// applies to x.
std::optional<at::ScalarType> NormImpl::kernel_type(const torch::Tensor& x) const {
  if (kind_ != NormKind::layernorm || !cuda_kernel_ || !x.is_cuda() || !at::autocast::is_autocast_enabled(at::kCUDA)) {
    return std::nullopt;
  }
  const at::ScalarType type = at::autocast::get_autocast_dtype(at::kCUDA);
  if (!layer_norm_cuda_applies(x, weight, bias, type)) return std::nullopt;
  return type;
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) {
  if (kind_ == NormKind::layernorm) {
    if (const auto type = kernel_type(x)) return layer_norm_cuda_lowp(x, weight, bias, eps_, *type);
    return torch::layer_norm(x, {width_}, weight, bias, eps_);
  }
  // x * rsqrt(mean(x^2) + eps) * weight, computed in fp32 and returned in x's dtype, as transformers'
  // LlamaRMSNorm / NanoChatRMSNorm compute it.
  const auto x32 = x.to(torch::kFloat);
  auto y = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  if (weight.defined()) return weight * y.to(x.scalar_type());
  return y.to(x.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> NormImpl::add_then_forward(const torch::Tensor& x, const torch::Tensor& branch) {
  const auto type = kernel_type(x);
  if (type && branch.scalar_type() == *type && branch.sizes() == x.sizes()) {
    return add_layer_norm_cuda_lowp(x, branch, weight, bias, eps_, *type);
  }
  auto sum = x + branch;
  return {sum, forward(sum)};
}

RotaryAngles rotary_angles(const GptConfig& config, const torch::Tensor& positions) {
  if (config.positions != Positions::rotary) return {};
  // inv_freq_i = 1 / theta^(2i / hs), angle = position * inv_freq, each frequency for both halves
  // (transformers' default RoPE, computed the same way in fp32).
  const int64_t hs = config.head_size();
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(positions.device());
  const auto inv_freq =
      torch::pow(config.rope_theta, torch::arange(0, hs, 2, options.dtype(torch::kLong)).to(torch::kFloat) /
                                        static_cast<double>(hs))
          .reciprocal();
  const auto freqs = positions.to(torch::kFloat).unsqueeze(-1) * inv_freq;
  const auto angles = torch::cat({freqs, freqs}, -1);
  return {angles.cos(), angles.sin()};
}

namespace {

// Llama's rotation of the pairs (x_i, x_{i + hs/2}) by the positions' angles: x cos + rotate_half(x) sin
// with rotate_half(x) = (-x2, x1). x (B, H, T, hs); the angles in x's dtype, as transformers casts them.
torch::Tensor rotate(const torch::Tensor& x, const RotaryAngles& rope) {
  const auto halves = x.chunk(2, -1);
  const auto rotated_half = torch::cat({-halves[1], halves[0]}, -1);
  return x * rope.cos.to(x.scalar_type()) + rotated_half * rope.sin.to(x.scalar_type());
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& config, WeightInit init, bool cuda_norm_kernel)
    : n_head_(config.n_head),
      n_kv_head_(config.kv_heads()),
      head_size_(config.head_size()),
      dropout_(config.dropout) {
  c_attn = register_module("c_attn", make_linear(config.n_embd, config.qkv_rows(), config.bias, init));
  c_proj = register_module("c_proj", make_linear(n_head_ * head_size_, config.n_embd, config.bias, init));
  if (config.qk_norm) {
    q_norm = register_module("q_norm", Norm(head_size_, config, cuda_norm_kernel));
    k_norm = register_module("k_norm", Norm(head_size_, config, cuda_norm_kernel));
  }
  resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(config.dropout));
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> CausalSelfAttentionImpl::queries_keys_values(
    const torch::Tensor& qkv, int64_t B, int64_t T, const RotaryAngles& rope) {
  const auto parts = qkv.split_with_sizes({n_head_ * head_size_, n_kv_head_ * head_size_, n_kv_head_ * head_size_}, 2);
  // (B, T, heads * hs) -> (B, heads, T, hs): heads become a batch dimension for the attention kernel.
  auto heads = [&](const torch::Tensor& t, int64_t n) { return t.view({B, T, n, head_size_}).transpose(1, 2); };
  auto q = heads(parts[0], n_head_), k = heads(parts[1], n_kv_head_), v = heads(parts[2], n_kv_head_);
  // QK-norm before the rotation: the order of Qwen3's and OLMo's; for a gain-free RMSNorm (nanochat's,
  // which normalizes after) the two orders are the same function, since the rotation keeps the norm.
  if (q_norm) {
    q = q_norm(q);
    k = k_norm(k);
  }
  if (rope.defined()) {
    q = rotate(q, rope);
    k = rotate(k, rope);
  }
  return {q, k, v};
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const BlockContext& context) {
  const int64_t B = x.size(0), T = x.size(1);
  const bool gqa = n_kv_head_ != n_head_;
  auto [q, k, v] = queries_keys_values(linear_of(c_attn, x, context), B, T, context.rope);
  torch::Tensor y;
  if (!context.row_caches.empty()) {
    y = attend_rows(q, k, v, context);
  } else if (!context.cache) {
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, is_training() ? dropout_ : 0.0,
                                         /*is_causal=*/true, /*scale=*/std::nullopt, /*enable_gqa=*/gqa);
  } else {
    const int64_t past = context.cache->length();
    auto [keys, values] = context.cache->append(context.layer, k, v);
    if (past == 0) {
      // A first read is the uncached computation exactly (its own fresh keys, the causal kernel; no
      // dropout, as in eval mode), so the cached and uncached paths agree bit for bit on it.
      y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, 0.0, /*is_causal=*/true, std::nullopt, gqa);
    } else if (T == 1) {
      // One new position sees every cached one: no mask at all.
      y = at::scaled_dot_product_attention(q, keys, values, /*attn_mask=*/{}, 0.0, /*is_causal=*/false, std::nullopt,
                                           gqa);
    } else {
      // Several new positions: query i sees the past and new positions up to its own (a causal mask
      // aligned to the bottom right, which is_causal's top-left alignment is not).
      auto allowed =
          torch::ones({T, past + T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).tril(past);
      y = at::scaled_dot_product_attention(q, keys, values, allowed, 0.0, /*is_causal=*/false, std::nullopt, gqa);
    }
  }
  const auto out = linear_of(c_proj, y.transpose(1, 2).contiguous().view({B, T, n_head_ * head_size_}), context);
  return context.caches() ? out : resid_dropout_(out);
}

torch::Tensor CausalSelfAttentionImpl::attend_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                   const BlockContext& context) {
  const int64_t B = q.size(0);
  if (q.size(2) != 1 || static_cast<int64_t>(context.row_caches.size()) != B) {
    throw std::logic_error("attention: a step of several sequences reads one position per sequence, one cache each");
  }
  // Each row is one sequence's T == 1 step of forward() (every cached position seen, no mask), on its own
  // cache: the same computation, so the same result, as that sequence decoded alone.
  std::vector<torch::Tensor> rows;
  rows.reserve(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    KvCache& cache = *context.row_caches[static_cast<size_t>(i)];
    if (cache.length() == 0) throw std::logic_error("attention: a sequence's first read is not a decoding step");
    auto [keys, values] = cache.append(context.layer, k.narrow(0, i, 1), v.narrow(0, i, 1));
    rows.push_back(at::scaled_dot_product_attention(q.narrow(0, i, 1), keys, values, /*attn_mask=*/{}, 0.0,
                                                    /*is_causal=*/false, std::nullopt, n_kv_head_ != n_head_));
  }
  return torch::cat(rows);
}

MlpImpl::MlpImpl(const GptConfig& config, WeightInit init) : kind_(config.mlp) {
  c_fc = register_module("c_fc", make_linear(config.n_embd, config.mlp_in_rows(), config.bias, init));
  c_proj = register_module("c_proj", make_linear(config.mlp_width(), config.n_embd, config.bias, init));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
}

torch::Tensor MlpImpl::activation(const torch::Tensor& h) const {
  switch (kind_) {
    case MlpKind::gelu_tanh:
      // GPT-2 was trained with the tanh approximation of GELU; keep it to match its weights. On the CPU
      // in float32 it runs our cheaper kernel (model/gelu_tanh_cpu.h), elsewhere ATen's.
      return gelu_tanh(h);
    case MlpKind::relu2:
      return torch::relu(h).square();
    case MlpKind::swiglu: {
      const auto gate_up = h.chunk(2, -1);
      return torch::silu(gate_up[0]) * gate_up[1];
    }
  }
  throw std::logic_error("unknown MLP kind");
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x, const BlockContext& context) {
  const auto out = linear_of(c_proj, activation(linear_of(c_fc, x, context)), context);
  return context.caches() ? out : dropout_(out);
}

BlockImpl::BlockImpl(const GptConfig& config, WeightInit init, Recompute recompute, bool cuda_norm_kernel)
    : recompute_(recompute) {
  ln_1 = register_module("ln_1", Norm(config.n_embd, config, cuda_norm_kernel));
  attn = register_module("attn", CausalSelfAttention(config, init, cuda_norm_kernel));
  ln_2 = register_module("ln_2", Norm(config.n_embd, config, cuda_norm_kernel));
  mlp = register_module("mlp", Mlp(config, init));
}

ResidualStream BlockImpl::forward(const ResidualStream& stream, const BlockContext& context) {
  // A read with the cache records no gradient: nothing to recompute.
  const Recompute recompute = context.caches() ? Recompute::none : recompute_;
  if (recompute != Recompute::block) return attention_then_mlp(stream, context, recompute);
  // Only the block's input is kept; backward reruns this same forward from it.
  return {recompute_in_backward(
      [this, context](const torch::Tensor& in) {
        return attention_then_mlp({in, {}}, context, Recompute::none).whole();
      },
      stream.whole())};
}

ResidualStream BlockImpl::attention_then_mlp(const ResidualStream& stream, const BlockContext& context,
                                             Recompute recompute) {
  // in = x + pending, h = ln_1(in); then mid = in + attn(h), h2 = ln_2(mid).
  auto [in, h] = stream.pending.defined() ? ln_1->add_then_forward(stream.x, stream.pending)
                                          : std::pair{stream.x, ln_1(stream.x)};
  if (recompute == Recompute::mlp) {
    // The MLP's activations (the 4x-wide ones) are recomputed in backward from mid, which is kept.
    const torch::Tensor mid = in + attn(h, context);
    return {mid + recompute_in_backward([this](const torch::Tensor& m) { return mlp(ln_2(m)); }, mid)};
  }
  auto [mid, h2] = ln_2->add_then_forward(in, attn(h, context));
  return {mid, mlp(h2, context)};
}

}  // namespace mygpt
