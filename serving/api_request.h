#pragma once
// The body of POST /v1/chat/completions and /v1/completions, read and checked: every field OpenAI's API
// defines that this server honours, each refused with the error object naming it when it is of the wrong
// type or out of range (a field it does not honour, too: a request is never half understood).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serving/api_error.h"

namespace mygpt {

enum class Endpoint { chat_completions, completions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::chat_completions;
  std::string model;
  // chat: (role, content) in order, roles "system", "user", "assistant"; the last is the user's.
  std::vector<std::pair<std::string, std::string>> messages;
  std::string prompt;                 // completions
  std::optional<int64_t> max_tokens;  // none: what the server allows and the context leaves
  double temperature = 1.0;           // OpenAI's default
  double top_p = 1.0;
  int64_t top_k = 0;  // not OpenAI's, but vLLM's and transformers': 0 keeps all
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // at most 4, none empty
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

// Parses and checks a request body (UTF-8 JSON). Throws ApiError (400) naming the problem.
CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint);

}  // namespace mygpt
