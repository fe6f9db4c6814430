#include "model/sampling.h"

#include <limits>
#include <stdexcept>
#include <string>

namespace mygpt {
namespace {

void check_vocab_limit(int64_t vocab_limit, int64_t vocab) {
  if (vocab_limit < 0 || vocab_limit > vocab) {
    throw std::invalid_argument("vocabulary limit " + std::to_string(vocab_limit) + " is not within the model's 0.." +
                                std::to_string(vocab));
  }
}

}  // namespace

torch::Tensor limit_vocab(const torch::Tensor& logits, int64_t vocab_limit) {
  const int64_t vocab = logits.size(-1);
  check_vocab_limit(vocab_limit, vocab);
  if (vocab_limit == 0 || vocab_limit == vocab) return logits;
  auto limited = logits.clone();
  limited.slice(-1, vocab_limit).fill_(-std::numeric_limits<double>::infinity());
  return limited;
}

torch::Tensor sample_next(torch::Tensor logits, const SamplingOptions& options, std::optional<at::Generator> generator) {
  if (options.temperature == 0.0) return logits.argmax(-1, /*keepdim=*/true);
  auto scaled = logits / options.temperature;
  // Dividing finite logits by a temperature of 1 or more cannot overflow: the check (a reduction and a
  // wait for the device, per token) is for smaller ones only.
  if (options.temperature < 1.0 && !torch::isfinite(scaled.amax(-1)).all().item<bool>()) {
    // A temperature so small (a subnormal one) that the largest logit over it overflows: the same
    // distribution from logits less their maximum (every value then at most 0, the largest exactly 0), so
    // sampling tends to greedy as the temperature does instead of failing on inf - inf.
    scaled = (logits - logits.amax(-1, /*keepdim=*/true)) / options.temperature;
  }
  logits = scaled;
  if (options.top_k > 0 && options.top_k < logits.size(-1)) {
    // Everything below the k-th largest logit gets zero probability.
    auto kth = std::get<0>(logits.topk(options.top_k, -1)).select(-1, -1).unsqueeze(-1);
    logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
  }
  if (options.top_p < 1.0) {
    // Sorted from the least likely up, an id is cut when the ids below it hold at most 1 - top_p of the
    // probability; the most likely id always stays (transformers' TopPLogitsWarper, min_tokens_to_keep 1).
    const auto [sorted, order] = logits.sort(/*dim=*/-1, /*descending=*/false);
    auto cut = torch::softmax(sorted, -1).cumsum(-1) <= (1.0 - options.top_p);
    cut.select(-1, -1).fill_(false);
    logits = logits.masked_fill(cut.scatter(-1, order, cut), -std::numeric_limits<float>::infinity());
  }
  auto probs = torch::softmax(logits, -1);
  if (generator && generator->device() != probs.device()) {
    // A generator of another device (a CPU one while training on a GPU): draw there, a small copy.
    return torch::multinomial(probs.to(generator->device()), 1, false, generator).to(probs.device());
  }
  return torch::multinomial(probs, 1, /*replacement=*/false, generator);
}

namespace {

torch::Tensor last_block(const torch::Tensor& tokens, int64_t block_size) {
  const int64_t T = tokens.size(1);
  return T > block_size ? tokens.slice(1, T - block_size) : tokens;
}

// The logits that follow `tokens` (B, T), whose last column `next` is the newest token. With a cache
// that holds every earlier position of the window, only `next` is computed; a full cache is refilled
// from the last block (the window slid by one, so every position moved).
torch::Tensor logits_after(Gpt& model, const torch::Tensor& tokens, const torch::Tensor& next,
                           std::optional<KvCache>& cache) {
  const int64_t block_size = model->config().block_size;
  if (!cache) return model->forward(last_block(tokens, block_size), {.last_position_only = true});
  if (!cache->full()) return model->forward(next, {.cache = &*cache, .last_position_only = true});
  cache->clear();
  return model->forward(last_block(tokens, block_size), {.cache = &*cache, .last_position_only = true});
}

}  // namespace

torch::Tensor generate(Gpt& model, torch::Tensor prompt, const SamplingOptions& options,
                       std::optional<at::Generator> generator, const NewTokensCallback& on_new_tokens) {
  if (options.max_new_tokens < 0) throw std::invalid_argument("max new tokens must not be negative");
  if (options.temperature < 0) throw std::invalid_argument("temperature must not be negative");
  if (options.top_k < 0) throw std::invalid_argument("top-k must not be negative");
  if (prompt.dim() != 2 || prompt.size(1) == 0) throw std::invalid_argument("the prompt must not be empty");
  check_vocab_limit(options.vocab_limit, model->config().vocab_size);
  if (options.max_new_tokens == 0) return prompt;

  torch::NoGradGuard no_grad;
  // Training mode comes back however generation ends: at the end, non-finite logits, or a callback that
  // throws to stop it (a training run's sample when a stop is asked).
  struct ModeRestore {
    Gpt& model;
    bool training;
    ~ModeRestore() { model->train(training); }
  } restore{model, model->is_training()};
  model->eval();
  std::optional<KvCache> cache;
  if (options.kv_cache) cache.emplace(model->make_kv_cache());
  const int64_t block_size = model->config().block_size;
  auto tokens = prompt;
  auto logits = model->forward(last_block(tokens, block_size),
                               {.cache = cache ? &*cache : nullptr, .last_position_only = true});
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    if (!torch::isfinite(logits).all().item<bool>()) throw NonFiniteLogits();
    auto next = sample_next(limit_vocab(logits.to(torch::kFloat), options.vocab_limit), options, generator);
    tokens = torch::cat({tokens, next}, 1);
    if (on_new_tokens) on_new_tokens(next);
    if (i + 1 < options.max_new_tokens) logits = logits_after(model, tokens, next, cache);
  }
  return tokens;
}

}  // namespace mygpt
