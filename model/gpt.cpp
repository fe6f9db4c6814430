#include "model/gpt.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "model/decode_linear.h"

namespace mygpt {
namespace {

// An Embedding given its weight (EmbeddingOptions::_weight) skips its N(0, 1) init.
torch::nn::Embedding make_embedding(int64_t rows, int64_t width, WeightInit init) {
  torch::nn::EmbeddingOptions options(rows, width);
  if (init == WeightInit::for_loading) options._weight(torch::empty({rows, width}));
  if (init == WeightInit::unallocated) options._weight(unallocated_tensor({rows, width}));
  return torch::nn::Embedding(options);
}

// The unfused head's cross-entropy over full (N, vocab) logits, upcast to fp32 as under autocast.
torch::Tensor full_logits_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                        LossReduction reduction) {
  using Options = torch::nn::functional::CrossEntropyFuncOptions;
  const Options::reduction_t how = reduction == LossReduction::mean  ? Options::reduction_t(torch::kMean)
                                   : reduction == LossReduction::sum ? Options::reduction_t(torch::kSum)
                                                                     : Options::reduction_t(torch::kNone);
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}).to(torch::kFloat),
                                              targets.reshape({-1}), Options().reduction(how));
}

torch::Tensor rows_of(const torch::Tensor& hidden) { return hidden.reshape({-1, hidden.size(-1)}); }

}  // namespace

GptImpl::GptImpl(const GptConfig& config, WeightInit init, const GptRuntime& runtime)
    : config_(config), weight_init_(init), runtime_(runtime) {
  config_.validate();
  wte = register_module("wte", make_embedding(config.vocab_size, config.n_embd, init));
  if (config.positions == Positions::learned) {
    wpe = register_module("wpe", make_embedding(config.block_size, config.n_embd, init));
  }
  drop_ = register_module("drop", torch::nn::Dropout(config.dropout));
  if (config.embedding_norm) ln_e = register_module("ln_e", Norm(config.n_embd, config));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    h->push_back(Block(config, init, runtime.recompute, runtime.cuda_norm_kernel));
  }
  ln_f = register_module("ln_f", Norm(config.n_embd, config));
  if (!config.tie_head) {
    lm_head = register_module("lm_head", make_linear(config.n_embd, config.vocab_size, /*bias=*/false, init));
  }
  if (init == WeightInit::random) reset_parameters();
}

std::vector<GptImpl::InitStep> GptImpl::init_steps() const {
  std::vector<InitStep> steps;
  auto is_residual_writer = [](const std::string& name) {
    return name.size() >= 6 && name.compare(name.size() - 6, 6, "c_proj") == 0;
  };
  using Draw = std::function<void(torch::Tensor&)>;
  auto fill = [](double value) -> Draw { return [value](torch::Tensor& t) { t.fill_(value); }; };
  auto normal = [](double std) -> Draw { return [std](torch::Tensor& t) { t.normal_(0.0, std); }; };
  auto uniform = [](double bound) -> Draw { return [bound](torch::Tensor& t) { t.uniform_(-bound, bound); }; };
  auto prefixed = [](const std::string& prefix, const std::string& name) {
    return prefix.empty() ? name : prefix + "." + name;
  };
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (const auto* norm = item.value()->as<NormImpl>()) {
      if (norm->weight.defined()) steps.push_back({prefixed(item.key(), "weight"), fill(1.0)});
      if (norm->bias.defined()) steps.push_back({prefixed(item.key(), "bias"), fill(0.0)});
    }
  }
  if (config_.init == InitKind::nanochat) {
    // karpathy/nanochat's init_weights: uniform with the std of N(0, 1/n_embd) (bound sqrt(3) std, no
    // outliers) for what reads the residual stream, zero for what writes into it, so that every block
    // starts as the identity; a near-zero head.
    const double bound = std::sqrt(3.0 / static_cast<double>(config_.n_embd));
    steps.push_back({"wte.weight", normal(1.0)});
    if (wpe) steps.push_back({"wpe.weight", normal(0.02)});
    for (const auto& item : h->named_modules(/*name_prefix=*/"h", /*include_self=*/false)) {
      if (const auto* linear = item.value()->as<torch::nn::LinearImpl>()) {
        steps.push_back({item.key() + ".weight", is_residual_writer(item.key()) ? fill(0.0) : uniform(bound)});
        if (linear->bias.defined()) steps.push_back({item.key() + ".bias", fill(0.0)});
      }
    }
    if (lm_head) steps.push_back({"lm_head.weight", normal(0.001)});
    return steps;
  }
  const double std = 0.02;
  // Each block adds two residual writes; scaling them keeps the residual stream's variance from
  // growing with depth (GPT-2 paper, section 2.3).
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  steps.push_back({"wte.weight", normal(std)});
  if (wpe) steps.push_back({"wpe.weight", normal(std)});
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (const auto* linear = item.value()->as<torch::nn::LinearImpl>()) {
      steps.push_back({item.key() + ".weight", normal(is_residual_writer(item.key()) ? residual_std : std)});
      if (linear->bias.defined()) steps.push_back({item.key() + ".bias", fill(0.0)});
    }
  }
  return steps;
}

void GptImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  auto parameters = named_parameters();
  for (const InitStep& step : init_steps()) step.draw(parameters[step.name]);
}

void GptImpl::for_each_initial_value(const std::function<void(const std::string&, const torch::Tensor&)>& take) const {
  torch::NoGradGuard no_grad;
  // The draws a random model's constructor takes first: LibTorch's Embedding and Linear initialize
  // themselves as they are built (N(0, 1); kaiming-uniform weight, uniform bias), in the order the modules
  // are built, which is named_modules' order. A module of the same options built again here takes the
  // same draws; its values are dropped, as reset_parameters overwrites them.
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (const auto* embedding = item.value()->as<torch::nn::EmbeddingImpl>()) {
      torch::nn::Embedding(embedding->options.num_embeddings(), embedding->options.embedding_dim());
    } else if (const auto* linear = item.value()->as<torch::nn::LinearImpl>()) {
      torch::nn::Linear(torch::nn::LinearOptions(linear->weight.size(1), linear->weight.size(0))
                            .bias(linear->bias.defined()));
    }
  }
  // Then reset_parameters' draws, each into a tensor of its own that lives until `take` returns.
  const auto parameters = named_parameters();
  std::vector<InitStep> steps = init_steps();
  if (steps.size() != parameters.size()) throw std::logic_error("init_steps does not cover every parameter once");
  for (InitStep& step : steps) {
    const torch::Tensor& parameter = parameters[step.name];
    torch::Tensor value = torch::empty(parameter.sizes(), torch::TensorOptions().dtype(parameter.scalar_type()));
    step.draw(value);
    take(step.name, value);
  }
}

std::pair<torch::Tensor, RotaryAngles> GptImpl::embed(const torch::Tensor& idx, int64_t first_position) {
  const int64_t T = idx.size(1);
  auto pos = torch::arange(first_position, first_position + T,
                           torch::TensorOptions().dtype(torch::kLong).device(idx.device()));
  unit_begins(0);
  auto x = wpe ? wte(idx) + wpe(pos) : wte(idx);
  if (ln_e) x = ln_e(x);
  x = drop_(x);
  unit_ends(0, {x});
  return {x, rotary_angles(config_, pos)};
}

torch::Tensor GptImpl::soft_capped(const torch::Tensor& logits) const {
  if (!config_.logit_softcap) return logits;
  const double cap = *config_.logit_softcap;
  return torch::tanh(logits.to(torch::kFloat) / cap) * cap;
}

torch::Tensor GptImpl::last_block_output(const torch::Tensor& idx, KvCache* cache) {
  const int64_t T = idx.size(1);
  const int64_t past = cache ? cache->length() : 0;
  if (!cache) {
    TORCH_CHECK(T <= config_.block_size, "sequence length ", T, " exceeds block size ", config_.block_size);
  } else if (cache->capacity() != config_.block_size || past + T > config_.block_size) {
    throw std::logic_error("forward: " + std::to_string(past + T) + " positions in a cache of " +
                           std::to_string(cache->capacity()) + " for block size " + std::to_string(config_.block_size));
  }
  // With a cache, positions continue those in it: the learned embedding's rows and the rotary angles of
  // past..past+T-1.
  auto [x, rope] = embed(idx, past);
  ResidualStream stream{x};
  for (int64_t layer = 0; layer < static_cast<int64_t>(h->size()); ++layer) {
    unit_begins(layer + 1);
    stream = h[layer]->as<BlockImpl>()->forward(stream, {rope, cache, layer});
    unit_ends(layer + 1, {stream.x, stream.pending});
  }
  if (cache) cache->advance(T);
  return stream.whole();
}

void GptImpl::check_vocab_limit(int64_t vocab_limit, const char* what) const {
  if (vocab_limit < 0 || vocab_limit > head_weight().size(0)) {
    throw std::logic_error(std::string(what) + ": vocab_limit outside the vocabulary");
  }
}

torch::Tensor GptImpl::head_rows(int64_t vocab_limit, const char* what) const {
  check_vocab_limit(vocab_limit, what);
  const torch::Tensor& weight = head_weight();
  return vocab_limit > 0 ? weight.narrow(0, 0, vocab_limit) : weight;
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx, const ForwardOptions& options) {
  if (options.last_position_only && options.positions.defined()) {
    throw std::logic_error("forward: the last position only, or the positions given, not both");
  }
  check_vocab_limit(options.vocab_limit, "logits");
  const bool continues_cache = options.cache != nullptr && options.cache->length() > 0;
  const torch::Tensor x = last_block_output(idx, options.cache);
  torch::Tensor hidden;
  unit_begins(config_.n_layer + 1);
  if (options.last_position_only) {
    // A read with the cache normalizes its last position alone; one without, every position and then
    // picks the last (each as it always has, so that a first read with the cache equals it bit for bit).
    hidden = options.cache ? ln_f(x.select(1, -1)) : ln_f(x).select(1, -1);
  } else {
    hidden = ln_f(x);
    if (options.positions.defined()) hidden = rows_of(hidden).index_select(0, options.positions);
  }
  unit_ends(config_.n_layer + 1, {hidden});
  unit_begins(head_unit());
  torch::Tensor logits = soft_capped(decoding_linear(hidden, head_rows(options.vocab_limit, "logits"), {}, continues_cache));
  unit_ends(head_unit(), {logits});
  return logits;
}

torch::Tensor GptImpl::decode_rows(const torch::Tensor& tokens, std::span<KvCache* const> caches,
                                  int64_t vocab_limit) {
  const int64_t B = tokens.size(0);
  if (tokens.dim() != 1 || static_cast<int64_t>(caches.size()) != B || B == 0) {
    throw std::logic_error("decode_rows: one token per sequence, one cache each");
  }
  std::vector<int64_t> past(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    const KvCache& cache = *caches[static_cast<size_t>(i)];
    if (cache.length() == 0 || cache.full() || cache.capacity() != config_.block_size) {
      throw std::logic_error("decode_rows: a sequence's cache is empty, full or not of this model");
    }
    past[static_cast<size_t>(i)] = cache.length();
  }
  const torch::Tensor head = head_rows(vocab_limit, "decode_rows");
  // Row i at its own position: the learned embedding's row and the rotary angles of past[i], (B, 1, ...)
  // where forward()'s one sequence has (1, ...); the same values.
  const auto positions = torch::tensor(past, torch::kLong).to(tokens.device()).unsqueeze(1);
  auto x = wte(tokens.unsqueeze(1));
  if (wpe) x = x + wpe(positions);
  if (ln_e) x = ln_e(x);
  RotaryAngles rope = rotary_angles(config_, positions);
  if (rope.defined()) rope = {rope.cos.unsqueeze(1), rope.sin.unsqueeze(1)};  // (B, 1, 1, hs) against (B, H, 1, hs)
  ResidualStream stream{x};
  for (int64_t layer = 0; layer < static_cast<int64_t>(h->size()); ++layer) {
    BlockContext context{rope, nullptr, layer};
    context.row_caches = caches;
    stream = h[layer]->as<BlockImpl>()->forward(stream, context);
  }
  for (KvCache* cache : caches) cache->advance(1);
  return soft_capped(row_invariant_linear(ln_f(stream.whole().select(1, 0)), head, {}));
}

torch::Tensor GptImpl::loss(const torch::Tensor& idx, const torch::Tensor& targets, LossReduction reduction,
                            int64_t vocab_limit) {
  std::optional<torch::NoGradGuard> no_grad;
  if (reduction == LossReduction::none) no_grad.emplace();
  check_vocab_limit(vocab_limit, "loss");
  const torch::Tensor x = last_block_output(idx, nullptr);
  unit_begins(config_.n_layer + 1);
  const torch::Tensor hidden = ln_f(x);
  unit_ends(config_.n_layer + 1, {hidden});
  unit_begins(head_unit());
  const torch::Tensor loss = head_loss(hidden, head_rows(vocab_limit, "loss"), targets, reduction);
  unit_ends(head_unit(), {loss});
  return loss;
}

torch::Tensor GptImpl::head_loss(const torch::Tensor& hidden, const torch::Tensor& head, const torch::Tensor& targets,
                                 LossReduction reduction) {
  if (reduction == LossReduction::none) {
    return head_cross_entropy(hidden, head, targets, reduction).view(targets.sizes());
  }
  if (reduction == LossReduction::mean) return head_cross_entropy(hidden, head, targets, reduction);
  const torch::Tensor rows = rows_of(hidden);
  const torch::Tensor flat_targets = targets.reshape({-1});
  const torch::Tensor trained = flat_targets.ge(0).nonzero().squeeze(1);
  if (trained.size(0) == 0) return (rows.sum() + head.sum()).to(torch::kFloat) * 0.0;
  return head_cross_entropy(rows.index_select(0, trained), head, flat_targets.index_select(0, trained), reduction);
}

torch::Tensor GptImpl::head_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& head,
                                          const torch::Tensor& targets, LossReduction reduction) {
  if (!runtime_.fused_loss) {
    return full_logits_cross_entropy(soft_capped(torch::linear(hidden, head)), targets, reduction);
  }
  const torch::Tensor rows = rows_of(hidden);
  const torch::Tensor flat_targets = targets.reshape({-1});
  const double cap = config_.logit_softcap.value_or(0.0);
  switch (reduction) {
    case LossReduction::mean:
      return chunked_lm_loss(rows, head, flat_targets, runtime_.loss, cap);
    case LossReduction::sum:
      // The chunked loss is a mean over its rows; times their count it is their sum, and its gradient
      // that of the sum.
      return chunked_lm_loss(rows, head, flat_targets, runtime_.loss, cap) * static_cast<double>(rows.size(0));
    case LossReduction::none:
      return chunked_lm_token_losses(rows, head, flat_targets, runtime_.loss, cap);
  }
  throw std::logic_error("unknown loss reduction");
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
