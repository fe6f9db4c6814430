#pragma once
// A checked request made into the job the scheduler decodes: its prompt ids (a chat model's rendering of
// the messages, or the prompt's tokens), its sampling, its reply's length within the limits and the
// model's context. Every limit a request passes is refused here with OpenAI's error object.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dataloader/chat_format.h"
#include "model/gpt.h"
#include "serving/api_request.h"
#include "serving/batch_scheduler.h"
#include "tokenizer/text_codec.h"

namespace mygpt {

// What a server serves: a model in eval mode, its tokenizer, and its chat format where it has room for one.
struct ServedModel {
  Gpt model{nullptr};
  const TextCodec* codec = nullptr;
  const ChatFormat* chat = nullptr;  // null: /v1/chat/completions is refused
  std::string name;                  // the "model" requests must name
  // Completions draw ids below this (a chat model's chat tokens included, as `generate` draws them), and
  // each id's text is decode_id's (a chat model's chat tokens as their names, as `generate` prints them).
  int64_t token_count = 0;
  std::function<std::string(int64_t)> decode_id;
};

struct RequestLimits {
  int64_t max_body_bytes = 1 << 20;
  int64_t max_prompt_tokens = 0;  // 0: the model's context less one position for the reply
  int64_t max_tokens = 1024;      // a reply's longest; a request without max_tokens gets this (or the context left)
};

// The job for a request; its prompt's token count in *prompt_tokens. Throws ApiError.
std::shared_ptr<Job> make_completion_job(const CompletionRequest& request, const ServedModel& served,
                                         const RequestLimits& limits);

}  // namespace mygpt
