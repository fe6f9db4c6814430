#include "model/gpt.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "model/decode_linear.h"
#include "model/gelu_tanh_cpu.h"

namespace mygpt {
namespace {

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
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

LayerNormImpl::LayerNormImpl(int64_t width, bool bias) {
  weight = register_parameter("weight", torch::ones({width}));
  if (bias) this->bias = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& config)
    : n_head_(config.n_head), dropout_(config.dropout) {
  c_attn = register_module("c_attn", make_linear(config.n_embd, 3 * config.n_embd, config.bias));
  c_proj = register_module("c_proj", make_linear(config.n_embd, config.n_embd, config.bias));
  resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(config.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto qkv = linear_of(c_attn, x).split(C, /*dim=*/2);
  // (B, T, C) -> (B, n_head, T, head_size): heads become a batch dimension for the attention kernel.
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head_, C / n_head_}).transpose(1, 2); };
  auto y = at::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), /*attn_mask=*/{},
                                            is_training() ? dropout_ : 0.0, /*is_causal=*/true);
  y = y.transpose(1, 2).contiguous().view({B, T, C});
  return resid_dropout_(linear_of(c_proj, y));
}

torch::Tensor CausalSelfAttentionImpl::forward_cached(const torch::Tensor& x, KvCache& cache, int64_t layer) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const int64_t past = cache.length();
  auto qkv = decoding_linear(c_attn, x, past > 0).split(C, /*dim=*/2);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head_, C / n_head_}).transpose(1, 2); };
  const auto q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  auto [keys, values] = cache.append(layer, k, v);
  torch::Tensor y;
  if (past == 0) {
    // A first read is forward()'s computation exactly (its own fresh keys, the causal kernel), so the
    // cached and uncached paths agree bit for bit on it.
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, 0.0, /*is_causal=*/true);
  } else if (T == 1) {
    // One new position sees every cached one: no mask at all.
    y = at::scaled_dot_product_attention(q, keys, values, /*attn_mask=*/{}, 0.0, /*is_causal=*/false);
  } else {
    // Several new positions: query i sees the past and new positions up to its own (a causal mask
    // aligned to the bottom right, which is_causal's top-left alignment is not).
    auto allowed = torch::ones({T, past + T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).tril(past);
    y = at::scaled_dot_product_attention(q, keys, values, allowed, 0.0, /*is_causal=*/false);
  }
  return decoding_linear(c_proj, y.transpose(1, 2).contiguous().view({B, T, C}), past > 0);
}

MlpImpl::MlpImpl(const GptConfig& config) {
  c_fc = register_module("c_fc", make_linear(config.n_embd, 4 * config.n_embd, config.bias));
  c_proj = register_module("c_proj", make_linear(4 * config.n_embd, config.n_embd, config.bias));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  // GPT-2 was trained with the tanh approximation of GELU; keep it to match its weights. On the CPU in
  // float32 it runs our cheaper kernel (model/gelu_tanh_cpu.h), elsewhere ATen's.
  return dropout_(linear_of(c_proj, gelu_tanh(linear_of(c_fc, x))));
}

torch::Tensor MlpImpl::forward_cached(const torch::Tensor& x, bool continues_cache) {
  return decoding_linear(c_proj, gelu_tanh(decoding_linear(c_fc, x, continues_cache)), continues_cache);
}

BlockImpl::BlockImpl(const GptConfig& config) {
  ln_1 = register_module("ln_1", LayerNorm(config.n_embd, config.bias));
  attn = register_module("attn", CausalSelfAttention(config));
  ln_2 = register_module("ln_2", LayerNorm(config.n_embd, config.bias));
  mlp = register_module("mlp", Mlp(config));
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  auto whole = [this](const torch::Tensor& in) {
    auto x = in + attn(ln_1(in));
    return x + mlp(ln_2(x));
  };
  switch (recompute) {
    case Recompute::block:
      return recompute_in_backward(whole, x);
    case Recompute::mlp:
      x = x + attn(ln_1(x));
      return x + recompute_in_backward([this](const torch::Tensor& in) { return mlp(ln_2(in)); }, x);
    case Recompute::none:
      break;
  }
  return whole(x);
}

torch::Tensor BlockImpl::forward_cached(torch::Tensor x, KvCache& cache, int64_t layer) {
  const bool continues_cache = cache.length() > 0;  // the cache advances once every layer has read
  x = x + attn->forward_cached(ln_1(x), cache, layer);
  return x + mlp->forward_cached(ln_2(x), continues_cache);
}

GptImpl::GptImpl(const GptConfig& config) : config_(config) {
  config_.validate();
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(config.block_size, config.n_embd));
  drop_ = register_module("drop", torch::nn::Dropout(config.dropout));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(Block(config));
  ln_f = register_module("ln_f", LayerNorm(config.n_embd, config.bias));
  reset_parameters();
}

void GptImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  const double std = 0.02;
  // Each block adds two residual writes; scaling them keeps the residual stream's variance from
  // growing with depth (GPT-2 paper, section 2.3).
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  wte->weight.normal_(0.0, std);
  wpe->weight.normal_(0.0, std);
  for (auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    const std::string& name = item.key();
    if (auto* linear = item.value()->as<torch::nn::LinearImpl>()) {
      const bool residual_writer = name.size() >= 6 && name.compare(name.size() - 6, 6, "c_proj") == 0;
      linear->weight.normal_(0.0, residual_writer ? residual_std : std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* norm = item.value()->as<LayerNormImpl>()) {
      norm->weight.fill_(1.0);
      if (norm->bias.defined()) norm->bias.zero_();
    }
  }
}

torch::Tensor GptImpl::hidden_states(const torch::Tensor& idx) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= config_.block_size, "sequence length ", T, " exceeds block size ", config_.block_size);
  auto pos = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(idx.device()));
  auto x = drop_(wte(idx) + wpe(pos));
  for (const auto& block : *h) x = block->as<BlockImpl>()->forward(x);
  return ln_f(x);
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx) {
  // Weight tying: the output head reuses the token embedding matrix (saves 38M parameters for GPT-2
  // and helps quality, Press & Wolf 2017).
  return torch::linear(hidden_states(idx), wte->weight);
}

torch::Tensor GptImpl::last_token_logits(const torch::Tensor& idx) {
  return torch::linear(hidden_states(idx).select(1, -1), wte->weight);
}

torch::Tensor GptImpl::last_token_logits(const torch::Tensor& idx, KvCache& cache) {
  const int64_t past = cache.length(), T = idx.size(1);
  if (cache.capacity() != config_.block_size || past + T > config_.block_size) {
    throw std::logic_error("last_token_logits: " + std::to_string(past + T) + " positions in a cache of " +
                           std::to_string(cache.capacity()) + " for block size " + std::to_string(config_.block_size));
  }
  auto pos = torch::arange(past, past + T, torch::TensorOptions().dtype(torch::kLong).device(idx.device()));
  auto x = drop_(wte(idx) + wpe(pos));
  for (int64_t layer = 0; layer < static_cast<int64_t>(h->size()); ++layer) {
    x = h[layer]->as<BlockImpl>()->forward_cached(x, cache, layer);
  }
  cache.advance(T);
  return decoding_linear(ln_f(x.select(1, -1)), wte->weight, {}, past > 0);
}

torch::Tensor GptImpl::loss(const torch::Tensor& idx, const torch::Tensor& targets, int64_t vocab_limit) {
  const int64_t rows = wte->weight.size(0);
  if (vocab_limit < 0 || vocab_limit > rows) throw std::logic_error("loss: vocab_limit outside the vocabulary");
  const torch::Tensor head = vocab_limit > 0 ? wte->weight.narrow(0, 0, vocab_limit) : wte->weight;
  if (fused_loss_) return chunked_lm_loss(rows_of(hidden_states(idx)), head, targets.reshape({-1}), loss_options_);
  return full_logits_cross_entropy(torch::linear(hidden_states(idx), head), targets, torch::kMean);
}

torch::Tensor GptImpl::token_losses(const torch::Tensor& idx, const torch::Tensor& targets) {
  torch::NoGradGuard no_grad;
  const auto losses = fused_loss_
                          ? chunked_lm_token_losses(rows_of(hidden_states(idx)), wte->weight, targets.reshape({-1}),
                                                    loss_options_)
                          : full_logits_cross_entropy(forward(idx), targets, torch::kNone);
  return losses.view(targets.sizes());
}

void GptImpl::set_recompute(Recompute mode) {
  for (const auto& block : *h) block->as<BlockImpl>()->recompute = mode;
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
