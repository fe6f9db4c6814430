#pragma once
// One conversation with a model, turn by turn, for the `chat` command: one sequence of the inference
// engine (inference/engine.h) kept from turn to turn, and its KV cache with it: a new user message costs
// the forward pass of its own tokens, never of the history again. The ids that go in are the chat format's (dataloader/chat_format.h), the same the model was
// fine-tuned on; the reply is sampled token by token until <|assistant_end|>.
#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dataloader/chat_format.h"
#include "inference/engine.h"
#include "tokenizer/text_codec.h"
#include "model/gpt.h"
#include "model/sampling.h"

namespace mygpt {

// A message that does not fit in what is left of the model's context (its block): the caller says so
// and starts a new conversation. what() names the sizes.
struct ConversationFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ChatReply {
  std::string text;          // the reply's text (special tokens never appear in it)
  std::vector<int64_t> ids;  // the sampled ids, <|assistant_end|> included when it came
  bool finished = false;     // the model ended its turn with <|assistant_end|>
  bool interrupted = false;  // `stop` was raised while it was being written
  bool outgrew = false;      // the context filled up before the model ended its turn
};

class ChatSession {
 public:
  // model in eval mode on its device; format and codec outlive the session. options: temperature,
  // top_k and max_new_tokens (its vocab_limit is the tokenizer's size: the ids above are the special
  // tokens and padding, and of those only <|assistant_end|> may be drawn). system: put before the first
  // user message.
  ChatSession(Gpt& model, const ChatFormat& format, const TextCodec& codec, SamplingOptions options,
              std::string system = {});

  // Answers one user message. on_text gets the reply's text as it grows, in whole UTF-8 characters.
  // stop (may be null) is polled once per token: when it becomes true the reply ends there. Throws
  // ConversationFull, leaving the conversation as it was, when the message cannot fit in the context
  // with room for one token of reply.
  ChatReply reply(std::string_view user_message, const std::function<void(const std::string&)>& on_text = {},
                  const std::atomic<bool>* stop = nullptr);

  // Positions a user message needs (its turn, what is unread, one token of reply) in this conversation,
  // or, with in_new_conversation, in an empty one (the system message included).
  int64_t tokens_needed(std::string_view user_message, bool in_new_conversation = false) const;
  // Whether the message fits in what is left of the context now (reply() would not throw).
  bool fits(std::string_view user_message) const;

  // Forgets the conversation (the cache's memory is kept for the next one).
  void reset();
  // Positions of the context in use: what the model has read so far, plus the tokens waiting to be read.
  int64_t context_used() const;
  int64_t context_size() const { return sequence_.capacity(); }

 private:
  const ChatFormat& format_;
  const TextCodec& codec_;
  std::string system_;
  Engine engine_;
  // The conversation. Besides what its cache holds, it keeps the ids not read yet: the last token of a
  // reply (sampled, not yet fed back) and <|assistant_end|> where the model did not write it itself. The
  // next turn reads them first, so the history the model sees is always well formed.
  Sequence sequence_;

  // The message's turn, as reply() adds it after what is unread.
  std::vector<int64_t> turn_ids(std::string_view user_message, bool in_new_conversation) const;
};

}  // namespace mygpt
