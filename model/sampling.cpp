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

torch::Tensor generate(Gpt& model, torch::Tensor prompt, const SamplingOptions& options,
                       std::optional<at::Generator> generator) {
  if (options.max_new_tokens < 0) throw std::invalid_argument("max new tokens must not be negative");
  if (options.temperature < 0) throw std::invalid_argument("temperature must not be negative");
  if (options.top_k < 0) throw std::invalid_argument("top-k must not be negative");
  if (prompt.dim() != 2 || prompt.size(1) == 0) throw std::invalid_argument("the prompt must not be empty");
  check_vocab_limit(options.vocab_limit, model->config().vocab_size);

  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t block_size = model->config().block_size;
  auto tokens = prompt;
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t T = tokens.size(1);
    auto context = T > block_size ? tokens.slice(1, T - block_size) : tokens;
    auto logits = limit_vocab(model->last_token_logits(context).to(torch::kFloat), options.vocab_limit);  // (B, vocab)
    torch::Tensor next;
    if (options.temperature == 0.0) {
      next = logits.argmax(-1, /*keepdim=*/true);
    } else {
      logits = logits / options.temperature;
      if (options.top_k > 0 && options.top_k < logits.size(-1)) {
        // Everything below the k-th largest logit gets zero probability.
        auto kth = std::get<0>(logits.topk(options.top_k, -1)).select(-1, -1).unsqueeze(-1);
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      auto probs = torch::softmax(logits, -1);
      if (generator && generator->device() != probs.device()) {
        // A generator of another device (a CPU one while training on a GPU): draw there, a small copy.
        next = torch::multinomial(probs.to(generator->device()), 1, false, generator).to(probs.device());
      } else {
        next = torch::multinomial(probs, 1, /*replacement=*/false, generator);
      }
    }
    tokens = torch::cat({tokens, next}, 1);
  }
  model->train(was_training);
  return tokens;
}

}  // namespace mygpt
