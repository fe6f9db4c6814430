#include "serving/completion_job.h"

#include <stdexcept>
#include <vector>

#include "serving/chat_reply.h"

namespace mygpt {
namespace {

std::vector<int64_t> chat_prompt(const CompletionRequest& request, const ServedModel& served) {
  if (served.chat == nullptr) {
    throw invalid_request("model '" + served.name + "' has no chat format (no rows for its chat tokens): use "
                          "/v1/completions", "messages");
  }
  std::vector<ChatMessage> history;
  for (size_t i = 0; i + 1 < request.messages.size(); ++i) {
    const auto& [role, content] = request.messages[i];
    history.push_back({*parse_chat_role(role), content});
  }
  try {
    return served.chat->render_prompt(history, request.messages.back().second);
  } catch (const std::invalid_argument& e) {  // the turns' order, a character the tokenizer lacks
    throw invalid_request(std::string("messages: ") + e.what(), "messages");
  }
}

std::vector<int64_t> completion_prompt(const CompletionRequest& request, const ServedModel& served) {
  try {
    return served.codec->encode(request.prompt);
  } catch (const std::invalid_argument& e) {
    throw invalid_request(std::string("prompt: ") + e.what(), "prompt");
  }
}

}  // namespace

std::shared_ptr<Job> make_completion_job(const CompletionRequest& request, const ServedModel& served,
                                         const RequestLimits& limits) {
  const bool chat = request.endpoint == Endpoint::chat_completions;
  const char* prompt_field = chat ? "messages" : "prompt";
  auto job = std::make_shared<Job>();
  job->prompt = chat ? chat_prompt(request, served) : completion_prompt(request, served);
  const auto prompt = static_cast<int64_t>(job->prompt.size());
  const int64_t context = served.model->config().block_size;
  const int64_t max_prompt = limits.max_prompt_tokens > 0 ? limits.max_prompt_tokens : context - 1;
  if (prompt > max_prompt || prompt >= context) {
    throw invalid_request("this model's maximum context length is " + std::to_string(context) + " tokens and the " +
                              "server takes prompts of at most " + std::to_string(std::min(max_prompt, context - 1)) +
                              "; your " + prompt_field + " resulted in " + std::to_string(prompt) + " tokens",
                          prompt_field, "context_length_exceeded");
  }
  int64_t max_tokens = std::min(limits.max_tokens, context - prompt);
  if (request.max_tokens) {
    if (*request.max_tokens > limits.max_tokens) {
      throw invalid_request("max_tokens is " + std::to_string(*request.max_tokens) + ", above this server's limit of " +
                                std::to_string(limits.max_tokens),
                            "max_tokens");
    }
    if (prompt + *request.max_tokens > context) {
      throw invalid_request("this model's maximum context length is " + std::to_string(context) +
                                " tokens; you requested " + std::to_string(prompt + *request.max_tokens) + " (" +
                                std::to_string(prompt) + " in the " + prompt_field + ", " +
                                std::to_string(*request.max_tokens) + " for the completion)",
                            "max_tokens", "context_length_exceeded");
    }
    max_tokens = *request.max_tokens;
  }
  SamplingOptions sampling{max_tokens, request.temperature, request.top_k};
  sampling.top_p = request.top_p;
  if (chat) {
    job->settings = chat_reply_settings(served.model, *served.chat, *served.codec, sampling);
  } else {
    sampling.vocab_limit = served.token_count;
    job->settings.sampling = sampling;
  }
  job->settings.seed = request.seed;
  job->stop = request.stop;
  return job;
}

}  // namespace mygpt
