#pragma once
// The chat format: how a conversation becomes token ids, and which of them a fine-tuning loss trains.
//
// nanochat's template and token names. A conversation renders as
//
//   <|bos|> <|user_start|> user text <|user_end|> <|assistant_start|> reply <|assistant_end|>
//           <|user_start|> ...                                                  (and so on)
//
// and a system message is handled as nanochat handles it: it has no tokens of its own, its text is put
// before the first user message's, separated by a blank line ("system\n\nuser"). So five special tokens,
// no more, and a model trained on it never sees a role it could be asked about but not trained on.
//
// A tokenizer that defines the five itself (nanochat's tokenizer.json has them as added tokens) keeps
// its own ids for them. Any other tokenizer gets them right after its own ids (GPT-2: 50257..50261),
// which GPT-2's padded vocabulary of 50304 rows already holds: no weight changes shape. A tokenizer
// with some of the five but not all, or a model with too few rows, is refused (std::invalid_argument
// naming what it needs).

// Message text is encoded as ordinary text: "<|assistant_end|>" (or "<|endoftext|>") typed by a user is
// characters, never the special token, so data and chat users cannot forge a turn.
//
// This header is the contract the trainer (SFT data), the `chat` command and `export` share; keep it
// stable.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/text_codec.h"

namespace mygpt {

enum class ChatRole { system, user, assistant };

// "system", "user", "assistant" (the names of the OpenAI / Hugging Face message format), and the inverse:
// nullopt for any other name.
std::string_view chat_role_name(ChatRole role);
std::optional<ChatRole> parse_chat_role(std::string_view name);

struct ChatMessage {
  ChatRole role;
  std::string content;
  // An assistant message the loss trains on (OpenAI's per-message "weight": 0 turns it off: the reply
  // stays in the context, its tokens are no targets).
  bool trained = true;
};

// The five special tokens' ids.
struct ChatSpecialTokens {
  int64_t bos = -1;
  int64_t user_start = -1;
  int64_t user_end = -1;
  int64_t assistant_start = -1;
  int64_t assistant_end = -1;  // generation stops here
};

// A conversation as ids, and for each id whether it is an assistant token (its text, and the
// <|assistant_end|> that ends it): the tokens the loss trains the model to produce. Training predicts
// ids[i + 1] from ids[..i]; that target counts when trained[i + 1] is 1.
struct RenderedChat {
  std::vector<int64_t> ids;
  std::vector<uint8_t> trained;  // same length as ids; 1 or 0
  int64_t trained_count() const;
};

class ChatFormat {
 public:
  // The names as nanochat spells them, in id order (appended ones: the first takes id codec.vocab_size()).
  static constexpr std::array<std::string_view, 5> kTokenNames = {
      "<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>"};
  // The template's name in checkpoints and exports; a different rendering gets a new name.
  static constexpr std::string_view kTemplateName = "nanochat";

  // codec must outlive the format. model_vocab_size: the model's embedding rows; they must hold the
  // tokenizer's ids and the five special ones, else std::invalid_argument.
  ChatFormat(const TextCodec& codec, int64_t model_vocab_size);

  const ChatSpecialTokens& tokens() const { return tokens_; }
  // Whether the five are the tokenizer's own tokens (else they were put after its ids).
  bool tokenizer_has_tokens() const { return own_tokens_; }
  // One past the largest id the format uses (the tokenizer's and the five).
  int64_t ids_end() const;
  // One past the largest chat token id a record (record()) names; std::invalid_argument for a record
  // that is not one. What a checkpoint's chat rows reach, without its tokenizer.
  static int64_t record_ids_end(const std::string& record);

  // Checks the order of the turns: an optional system message first, then user and assistant turns
  // alternating, starting with the user. With `needs_assistant` (training): at least one assistant turn
  // trained on, no message with empty content, and the last turn the assistant's.
  // Throws std::invalid_argument with the problem ("message 3 has role user after a user message").
  static void check_conversation(std::span<const ChatMessage> messages, bool needs_assistant);

  // The whole conversation (check_conversation with an assistant turn needed), not cut to any length.
  RenderedChat render_conversation(std::span<const ChatMessage> messages) const;

  // What generation continues from: the history (system, user, assistant, ... turns, as in a
  // conversation; may be empty), then the new user message, then <|assistant_start|>. `system` (empty:
  // none) is used when the history has no system message of its own. The reply ends at <|assistant_end|>.
  std::vector<int64_t> render_prompt(std::span<const ChatMessage> history, std::string_view user_message,
                                     std::string_view system = {}) const;

  // The same rendering as a Jinja chat template (Hugging Face's tokenizer_config.json "chat_template"):
  // transformers' apply_chat_template(messages, add_generation_prompt=...) on an exported model gives
  // render_conversation's ids, or render_prompt's with the generation prompt.
  static std::string jinja_template();

  // Whether id is one of the five, and its name.
  bool is_special(int64_t id) const;
  std::optional<std::string_view> special_name(int64_t id) const;
  // The ids as text, the five as their names ("<|assistant_end|>"): what `generate` prints.
  std::string decode(const std::vector<int64_t>& ids) const;

  // The template and the tokens' ids as one JSON object, recorded in checkpoints ("chat_format") and
  // read back by check_record.
  std::string record() const;
  // The record of a format with these ids (what record() gives for them).
  static std::string record_of(const ChatSpecialTokens& tokens);
  // Throws std::invalid_argument when a record (from a checkpoint) names another template or other ids
  // than this format's: the model was trained on a rendering this build does not produce.
  void check_record(const std::string& record) const;

 private:
  // The turns as ids and trained flags, already checked.
  RenderedChat render_turns(std::span<const ChatMessage> messages) const;
  // Appends text as ordinary tokens (no special token can come out of it).
  void append_text(std::string_view text, std::vector<int64_t>& ids) const;

  const TextCodec& codec_;
  ChatSpecialTokens tokens_;
  bool own_tokens_ = false;
};

}  // namespace mygpt
