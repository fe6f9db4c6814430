#include "model/gpt.h"

#include <ATen/autocast_mode.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "model/decode_linear.h"
#include "model/gelu_tanh_cpu.h"
#include "model/layer_norm_cuda.h"

namespace mygpt {
namespace {

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias, WeightInit init = WeightInit::random) {
  if (init == WeightInit::random) return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
  // LibTorch's Linear always runs its kaiming init in its constructor; built with no rows it draws nothing
  // (uniform_ over zero elements), and then takes uninitialized storage of the real shape.
  torch::nn::Linear linear(torch::nn::LinearOptions(in, 0).bias(bias));
  linear->options.out_features(out);
  torch::NoGradGuard no_grad;
  linear->weight.set_data(torch::empty({out, in}));
  if (bias) linear->bias.set_data(torch::empty({out}));
  return linear;
}

// An Embedding given its weight (EmbeddingOptions::_weight) skips its N(0, 1) init.
torch::nn::Embedding make_embedding(int64_t rows, int64_t width, WeightInit init) {
  torch::nn::EmbeddingOptions options(rows, width);
  if (init == WeightInit::for_loading) options._weight(torch::empty({rows, width}));
  return torch::nn::Embedding(options);
}

// The unfused head's cross-entropy over full (N, vocab) logits, upcast to fp32 as under autocast.
torch::Tensor full_logits_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                        torch::nn::functional::CrossEntropyFuncOptions::reduction_t reduction) {
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}).to(torch::kFloat),
                                              targets.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(reduction));
}

torch::Tensor rows_of(const torch::Tensor& hidden) { return hidden.reshape({-1, hidden.size(-1)}); }

// A Linear layer's product through ATen's linear, not the module's forward: the C++ frontend's
// torch::nn::Linear multiplies and then adds the bias in place, which under bf16 autocast adds an fp32 bias
// into a bf16 product through ATen's slow mixed-dtype kernel (on an H100: 48 such adds, 12 of a GPT-2 step's
// 89 ms, docs/gpu-runs/2026-11-26-h100-call4); ATen's linear fuses the bias into the matrix product.
torch::Tensor linear_of(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return torch::linear(x, layer->weight, layer->bias);
}

// weight applied to the rows of a read that continues a KV cache: model/decode_linear for the few rows of
// a decoding step on a CPU in fp32 (it streams the weight faster than the BLAS's one-row GEMM),
// torch::linear otherwise. A first read (`continues_cache` false) is always torch::linear, as forward()
// computes it, so that the cached and uncached paths agree bit for bit on it.
torch::Tensor decoding_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              bool continues_cache) {
  if (continues_cache && decode_linear_applies(x, weight, bias)) return decode_linear(x, weight, bias);
  return torch::linear(x, weight, bias);
}
torch::Tensor decoding_linear(const torch::nn::Linear& layer, const torch::Tensor& x, bool continues_cache) {
  return decoding_linear(x, layer->weight, layer->bias, continues_cache);
}

}  // namespace

NormImpl::NormImpl(int64_t width, const GptConfig& config)
    : width_(width), kind_(config.norm), eps_(config.norm_eps) {
  if (config.norm_weight) weight = register_parameter("weight", torch::ones({width}));
  if (config.bias && kind_ == NormKind::layernorm) bias = register_parameter("bias", torch::zeros({width}));
}

// Under autocast ATen's LayerNorm runs in fp32 and the matmul after it casts the output to 16 bits; the
// kernel writes those 16 bits directly (the same values to fp32 rounding). The dtype it writes, where it
// applies to x.
std::optional<at::ScalarType> NormImpl::kernel_type(const torch::Tensor& x) const {
  if (kind_ != NormKind::layernorm || !cuda_kernel || !x.is_cuda() || !at::autocast::is_autocast_enabled(at::kCUDA)) {
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

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& config, WeightInit init)
    : n_head_(config.n_head),
      n_kv_head_(config.kv_heads()),
      head_size_(config.head_size()),
      dropout_(config.dropout) {
  c_attn = register_module("c_attn", make_linear(config.n_embd, config.qkv_rows(), config.bias, init));
  c_proj = register_module("c_proj", make_linear(n_head_ * head_size_, config.n_embd, config.bias, init));
  if (config.qk_norm) {
    q_norm = register_module("q_norm", Norm(head_size_, config));
    k_norm = register_module("k_norm", Norm(head_size_, config));
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

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const RotaryAngles& rope) {
  const int64_t B = x.size(0), T = x.size(1);
  auto [q, k, v] = queries_keys_values(linear_of(c_attn, x), B, T, rope);
  auto y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, is_training() ? dropout_ : 0.0,
                                            /*is_causal=*/true, /*scale=*/std::nullopt,
                                            /*enable_gqa=*/n_kv_head_ != n_head_);
  y = y.transpose(1, 2).contiguous().view({B, T, n_head_ * head_size_});
  return resid_dropout_(linear_of(c_proj, y));
}

torch::Tensor CausalSelfAttentionImpl::forward_cached(const torch::Tensor& x, KvCache& cache, int64_t layer,
                                                      const RotaryAngles& rope) {
  const int64_t B = x.size(0), T = x.size(1);
  const int64_t past = cache.length();
  const bool gqa = n_kv_head_ != n_head_;
  auto [q, k, v] = queries_keys_values(decoding_linear(c_attn, x, past > 0), B, T, rope);
  auto [keys, values] = cache.append(layer, k, v);
  torch::Tensor y;
  if (past == 0) {
    // A first read is forward()'s computation exactly (its own fresh keys, the causal kernel), so the
    // cached and uncached paths agree bit for bit on it.
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, 0.0, /*is_causal=*/true, std::nullopt, gqa);
  } else if (T == 1) {
    // One new position sees every cached one: no mask at all.
    y = at::scaled_dot_product_attention(q, keys, values, /*attn_mask=*/{}, 0.0, /*is_causal=*/false, std::nullopt,
                                         gqa);
  } else {
    // Several new positions: query i sees the past and new positions up to its own (a causal mask
    // aligned to the bottom right, which is_causal's top-left alignment is not).
    auto allowed = torch::ones({T, past + T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).tril(past);
    y = at::scaled_dot_product_attention(q, keys, values, allowed, 0.0, /*is_causal=*/false, std::nullopt, gqa);
  }
  return decoding_linear(c_proj, y.transpose(1, 2).contiguous().view({B, T, n_head_ * head_size_}), past > 0);
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

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return dropout_(linear_of(c_proj, activation(linear_of(c_fc, x))));
}

torch::Tensor MlpImpl::forward_cached(const torch::Tensor& x, bool continues_cache) {
  return decoding_linear(c_proj, activation(decoding_linear(c_fc, x, continues_cache)), continues_cache);
}

BlockImpl::BlockImpl(const GptConfig& config, WeightInit init) {
  ln_1 = register_module("ln_1", Norm(config.n_embd, config));
  attn = register_module("attn", CausalSelfAttention(config, init));
  ln_2 = register_module("ln_2", Norm(config.n_embd, config));
  mlp = register_module("mlp", Mlp(config, init));
}

std::pair<torch::Tensor, torch::Tensor> BlockImpl::forward_deferred(const torch::Tensor& x, const torch::Tensor& pending,
                                                                     const RotaryAngles& rope) {
  // in = x + pending, h = ln_1(in); then mid = in + attn(h), h2 = ln_2(mid).
  auto [in, h] = pending.defined() ? ln_1->add_then_forward(x, pending) : std::pair{x, ln_1(x)};
  auto [mid, h2] = ln_2->add_then_forward(in, attn(h, rope));
  return {mid, mlp(h2)};
}

torch::Tensor BlockImpl::forward(torch::Tensor x, const RotaryAngles& rope) {
  auto whole = [this, rope](const torch::Tensor& in) {
    auto [mid, mlp_out] = forward_deferred(in, {}, rope);
    return mid + mlp_out;
  };
  switch (recompute) {
    case Recompute::block:
      return recompute_in_backward(whole, x);
    case Recompute::mlp:
      x = x + attn(ln_1(x), rope);
      return x + recompute_in_backward([this](const torch::Tensor& in) { return mlp(ln_2(in)); }, x);
    case Recompute::none:
      break;
  }
  return whole(x);
}

torch::Tensor BlockImpl::forward_cached(torch::Tensor x, KvCache& cache, int64_t layer, const RotaryAngles& rope) {
  const bool continues_cache = cache.length() > 0;  // the cache advances once every layer has read
  x = x + attn->forward_cached(ln_1(x), cache, layer, rope);
  return x + mlp->forward_cached(ln_2(x), continues_cache);
}

GptImpl::GptImpl(const GptConfig& config, WeightInit init) : config_(config), weight_init_(init) {
  config_.validate();
  wte = register_module("wte", make_embedding(config.vocab_size, config.n_embd, init));
  if (config.positions == Positions::learned) {
    wpe = register_module("wpe", make_embedding(config.block_size, config.n_embd, init));
  }
  drop_ = register_module("drop", torch::nn::Dropout(config.dropout));
  if (config.embedding_norm) ln_e = register_module("ln_e", Norm(config.n_embd, config));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(Block(config, init));
  ln_f = register_module("ln_f", Norm(config.n_embd, config));
  if (!config.tie_head) {
    lm_head = register_module("lm_head", make_linear(config.n_embd, config.vocab_size, /*bias=*/false, init));
  }
  if (init == WeightInit::random) reset_parameters();
}

void GptImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  auto is_residual_writer = [](const std::string& name) {
    return name.size() >= 6 && name.compare(name.size() - 6, 6, "c_proj") == 0;
  };
  for (auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (auto* norm = item.value()->as<NormImpl>()) {
      if (norm->weight.defined()) norm->weight.fill_(1.0);
      if (norm->bias.defined()) norm->bias.zero_();
    }
  }
  if (config_.init == InitKind::nanochat) {
    // karpathy/nanochat's init_weights: uniform with the std of N(0, 1/n_embd) (bound sqrt(3) std, no
    // outliers) for what reads the residual stream, zero for what writes into it, so that every block
    // starts as the identity; a near-zero head.
    const double bound = std::sqrt(3.0 / static_cast<double>(config_.n_embd));
    wte->weight.normal_(0.0, 1.0);
    if (wpe) wpe->weight.normal_(0.0, 0.02);
    for (auto& item : h->named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
      if (auto* linear = item.value()->as<torch::nn::LinearImpl>()) {
        if (is_residual_writer(item.key())) {
          linear->weight.zero_();
        } else {
          linear->weight.uniform_(-bound, bound);
        }
        if (linear->bias.defined()) linear->bias.zero_();
      }
    }
    if (lm_head) lm_head->weight.normal_(0.0, 0.001);
    return;
  }
  const double std = 0.02;
  // Each block adds two residual writes; scaling them keeps the residual stream's variance from
  // growing with depth (GPT-2 paper, section 2.3).
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  wte->weight.normal_(0.0, std);
  if (wpe) wpe->weight.normal_(0.0, std);
  for (auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (auto* linear = item.value()->as<torch::nn::LinearImpl>()) {
      linear->weight.normal_(0.0, is_residual_writer(item.key()) ? residual_std : std);
      if (linear->bias.defined()) linear->bias.zero_();
    }
  }
}

std::pair<torch::Tensor, RotaryAngles> GptImpl::embed(const torch::Tensor& idx, int64_t first_position) {
  const int64_t T = idx.size(1);
  auto pos = torch::arange(first_position, first_position + T,
                           torch::TensorOptions().dtype(torch::kLong).device(idx.device()));
  auto x = wpe ? wte(idx) + wpe(pos) : wte(idx);
  if (ln_e) x = ln_e(x);
  return {drop_(x), rotary_angles(config_, pos)};
}

torch::Tensor GptImpl::soft_capped(const torch::Tensor& logits) const {
  if (!config_.logit_softcap) return logits;
  const double cap = *config_.logit_softcap;
  return torch::tanh(logits.to(torch::kFloat) / cap) * cap;
}

torch::Tensor GptImpl::hidden_states(const torch::Tensor& idx) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= config_.block_size, "sequence length ", T, " exceeds block size ", config_.block_size);
  auto [x, rope] = embed(idx, 0);
  // Each block's MLP output is added to the residual stream by the next block's ln_1, in its kernel; a
  // block that recomputes in backward takes and returns the whole stream (its inputs are what it keeps).
  torch::Tensor pending;
  for (const auto& module : *h) {
    auto* block = module->as<BlockImpl>();
    if (block->recompute == Recompute::none) {
      std::tie(x, pending) = block->forward_deferred(x, pending, rope);
    } else {
      if (pending.defined()) x = x + std::exchange(pending, {});
      x = block->forward(x, rope);
    }
  }
  if (pending.defined()) x = x + pending;
  return ln_f(x);
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx) {
  // Weight tying (GPT-2): the output head reuses the token embedding matrix (saves 38M parameters for
  // GPT-2 and helps quality, Press & Wolf 2017); the newer members keep a head of their own.
  return soft_capped(torch::linear(hidden_states(idx), head_weight()));
}

torch::Tensor GptImpl::last_token_logits(const torch::Tensor& idx) {
  return soft_capped(torch::linear(hidden_states(idx).select(1, -1), head_weight()));
}

torch::Tensor GptImpl::last_token_logits(const torch::Tensor& idx, KvCache& cache) {
  const int64_t past = cache.length(), T = idx.size(1);
  if (cache.capacity() != config_.block_size || past + T > config_.block_size) {
    throw std::logic_error("last_token_logits: " + std::to_string(past + T) + " positions in a cache of " +
                           std::to_string(cache.capacity()) + " for block size " + std::to_string(config_.block_size));
  }
  // Positions continue those in the cache: the learned embedding's rows and the rotary angles of
  // past..past+T-1.
  auto [x, rope] = embed(idx, past);
  for (int64_t layer = 0; layer < static_cast<int64_t>(h->size()); ++layer) {
    x = h[layer]->as<BlockImpl>()->forward_cached(x, cache, layer, rope);
  }
  cache.advance(T);
  return soft_capped(decoding_linear(ln_f(x.select(1, -1)), head_weight(), {}, past > 0));
}

torch::Tensor GptImpl::loss(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit) {
  const torch::Tensor& weight = head_weight();
  const int64_t rows = weight.size(0);
  if (vocab_limit < 0 || vocab_limit > rows) throw std::logic_error("loss: vocab_limit outside the vocabulary");
  const torch::Tensor head = vocab_limit > 0 ? weight.narrow(0, 0, vocab_limit) : weight;
  if (fused_loss_) {
    return chunked_lm_loss(rows_of(hidden_states(idx)), head, targets.reshape({-1}), loss_options_,
                           config_.logit_softcap.value_or(0.0));
  }
  return full_logits_cross_entropy(soft_capped(torch::linear(hidden_states(idx), head)), targets, torch::kMean);
}

torch::Tensor GptImpl::masked_loss_sum(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit) {
  const torch::Tensor& weight = head_weight();
  if (vocab_limit < 0 || vocab_limit > weight.size(0)) throw std::logic_error("loss: vocab_limit outside the vocabulary");
  const torch::Tensor head = vocab_limit > 0 ? weight.narrow(0, 0, vocab_limit) : weight;
  const torch::Tensor hidden = rows_of(hidden_states(idx));
  const torch::Tensor flat_targets = targets.reshape({-1});
  const torch::Tensor trained = flat_targets.ge(0).nonzero().squeeze(1);
  const int64_t count = trained.size(0);
  if (count == 0) return (hidden.sum() + head.sum()).to(torch::kFloat) * 0.0;
  const torch::Tensor rows = hidden.index_select(0, trained);
  const torch::Tensor picked_targets = flat_targets.index_select(0, trained);
  if (fused_loss_) {
    // The chunked loss is a mean over its rows; times their count it is their sum, and its gradient
    // that of the sum.
    return chunked_lm_loss(rows, head, picked_targets, loss_options_, config_.logit_softcap.value_or(0.0)) *
           static_cast<double>(count);
  }
  return full_logits_cross_entropy(soft_capped(torch::linear(rows, head)), picked_targets, torch::kSum);
}

torch::Tensor GptImpl::token_losses(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit) {
  torch::NoGradGuard no_grad;
  const torch::Tensor& weight = head_weight();
  if (vocab_limit < 0 || vocab_limit > weight.size(0)) throw std::logic_error("loss: vocab_limit outside the vocabulary");
  const torch::Tensor head = vocab_limit > 0 ? weight.narrow(0, 0, vocab_limit) : weight;
  const auto losses =
      fused_loss_ ? chunked_lm_token_losses(rows_of(hidden_states(idx)), head, targets.reshape({-1}), loss_options_,
                                            config_.logit_softcap.value_or(0.0))
                  : full_logits_cross_entropy(soft_capped(torch::linear(hidden_states(idx), head)), targets, torch::kNone);
  return losses.view(targets.sizes());
}

torch::Tensor GptImpl::logits_of_rows(const torch::Tensor& hidden_rows, int64_t vocab_limit) {
  const torch::Tensor& weight = head_weight();
  if (vocab_limit < 0 || vocab_limit > weight.size(0)) throw std::logic_error("logits: vocab_limit outside the vocabulary");
  return soft_capped(torch::linear(hidden_rows, vocab_limit > 0 ? weight.narrow(0, 0, vocab_limit) : weight));
}

void GptImpl::set_recompute(Recompute mode) {
  for (const auto& block : *h) block->as<BlockImpl>()->recompute = mode;
}

void GptImpl::set_cuda_norm_kernel(bool enabled) {
  // The blocks' norms only: their outputs feed 16-bit matmuls whose input gradients come back 16-bit
  // anyway. The final norm's gradient comes from the loss in fp32, and under fp16 would lose range.
  for (const auto& block : *h) {
    for (auto& module : block->modules()) {
      if (auto* norm = module->as<NormImpl>()) norm->cuda_kernel = enabled;
    }
  }
}

int64_t GptImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

std::vector<torch::Tensor> GptImpl::decay_parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : parameters()) {
    if (p.dim() >= 2) out.push_back(p);
  }
  return out;
}

std::vector<torch::Tensor> GptImpl::no_decay_parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : parameters()) {
    if (p.dim() < 2) out.push_back(p);
  }
  return out;
}

}  // namespace mygpt
