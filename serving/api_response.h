#pragma once
// The JSON of OpenAI's responses: a whole completion, the chunks of a streamed one (server-sent events,
// "data: {...}\n\n", ending with "data: [DONE]\n\n"), the model list.
#include <cstdint>
#include <string>

#include "serving/api_request.h"

namespace mygpt {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// What every response of one request shares.
struct ResponseHead {
  Endpoint endpoint;
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
};

// The whole reply. finish_reason: "stop" or "length".
std::string completion_json(const ResponseHead& head, const std::string& text, const std::string& finish_reason,
                            const Usage& usage);

// One server-sent event: "data: " + JSON + "\n\n". The first chunk of a chat reply carries the role; a text
// chunk, new text; the last, the finish reason (and no text); a usage chunk has no choices.
std::string role_event(const ResponseHead& head);
std::string text_event(const ResponseHead& head, const std::string& text);
std::string finish_event(const ResponseHead& head, const std::string& finish_reason);
std::string usage_event(const ResponseHead& head, const Usage& usage);
std::string error_event(const ApiError& error);
inline constexpr const char* kDoneEvent = "data: [DONE]\n\n";

std::string models_json(const std::string& model, int64_t created);

}  // namespace mygpt
