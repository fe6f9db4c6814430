#include "dataloader/chat_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

namespace mygpt {
namespace {

// nanochat's way with a system prompt: no tokens of its own, its text before the first user message's.
constexpr std::string_view kSystemSeparator = "\n\n";

std::string message_number(size_t index) { return "message " + std::to_string(index + 1); }

// The id a tokenizer gives a chat token's name of its own: one token that decodes to the name (an
// added token of a tokenizer.json, as nanochat's are). GPT-2's BPE splits the names into pieces, and a
// character tokenizer lacks their characters or spells them in several.
std::optional<int64_t> own_token_id(const TextCodec& codec, std::string_view name) {
  std::vector<int64_t> ids;
  try {
    ids = codec.encode(name);
  } catch (const std::invalid_argument&) {  // characters it does not know
    return std::nullopt;
  }
  if (ids.size() != 1 || codec.decode(ids) != name) return std::nullopt;
  return ids.front();
}

std::string with_article(ChatRole role) {
  return (role == ChatRole::assistant ? "an " : "a ") + std::string(chat_role_name(role));
}

}  // namespace

std::string_view chat_role_name(ChatRole role) {
  switch (role) {
    case ChatRole::system:
      return "system";
    case ChatRole::user:
      return "user";
    case ChatRole::assistant:
      return "assistant";
  }
  throw std::logic_error("unnamed chat role");
}

std::optional<ChatRole> parse_chat_role(std::string_view name) {
  for (ChatRole role : {ChatRole::system, ChatRole::user, ChatRole::assistant}) {
    if (chat_role_name(role) == name) return role;
  }
  return std::nullopt;
}

int64_t RenderedChat::trained_count() const {
  int64_t count = 0;
  for (uint8_t t : trained) count += t;
  return count;
}

ChatFormat::ChatFormat(const TextCodec& codec, int64_t model_vocab_size) : codec_(codec) {
  std::array<std::optional<int64_t>, kTokenNames.size()> own;
  std::vector<std::string> missing;
  for (size_t i = 0; i < kTokenNames.size(); ++i) {
    own[i] = own_token_id(codec, kTokenNames[i]);
    if (!own[i]) missing.emplace_back(kTokenNames[i]);
  }
  int64_t needed = 0;
  if (missing.empty()) {
    own_tokens_ = true;
    tokens_ = {*own[0], *own[1], *own[2], *own[3], *own[4]};
    for (const auto& id : own) needed = std::max(needed, *id + 1);
    needed = std::max(needed, codec.vocab_size());
  } else if (missing.size() < kTokenNames.size()) {
    // Half a set: appending the rest would give the tokenizer two ids for one role's text.
    std::string names;
    for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name;
    throw std::invalid_argument("the tokenizer has some of the chat tokens but not " + names +
                                ": the chat format needs all five of " + std::string(kTokenNames[0]) + " ... " +
                                std::string(kTokenNames[4]) + ", or none (then they take the ids after its own)");
  } else {
    const int64_t first = codec.vocab_size();
    tokens_ = {first, first + 1, first + 2, first + 3, first + 4};
    needed = first + static_cast<int64_t>(kTokenNames.size());
  }
  if (model_vocab_size < needed) {
    throw std::invalid_argument(
        own_tokens_ ? "the model has " + std::to_string(model_vocab_size) + " vocabulary rows, fewer than its tokenizer's " +
                          std::to_string(needed) + " ids (the chat tokens included)"
                    : "the chat format needs " + std::to_string(kTokenNames.size()) +
                          " special token ids after the tokenizer's " + std::to_string(needed - 5) +
                          ", so a model of at least " + std::to_string(needed) + " vocabulary rows; this one has " +
                          std::to_string(model_vocab_size));
  }
}

int64_t ChatFormat::ids_end() const {
  int64_t end = codec_.vocab_size();
  for (int64_t id : {tokens_.bos, tokens_.user_start, tokens_.user_end, tokens_.assistant_start, tokens_.assistant_end}) {
    end = std::max(end, id + 1);
  }
  return end;
}

int64_t ChatFormat::record_ids_end(const std::string& text) {
  int64_t end = 0;
  try {
    const nlohmann::json record = nlohmann::json::parse(text);
    for (const auto& [name, id] : record.at("tokens").items()) end = std::max(end, id.get<int64_t>() + 1);
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument("its chat format record is not one (no \"tokens\" with ids)");
  }
  return end;
}

void ChatFormat::check_conversation(std::span<const ChatMessage> messages, bool needs_assistant) {
  bool any_assistant = false;
  // The role the next message must have: user after a system message or an assistant turn, and so on.
  std::optional<ChatRole> previous;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatRole role = messages[i].role;
    if (role == ChatRole::system && i != 0) {
      throw std::invalid_argument(message_number(i) + " is a system message; only the first may be one");
    }
    const ChatRole expected = (!previous || *previous != ChatRole::user) ? ChatRole::user : ChatRole::assistant;
    if (role != ChatRole::system && role != expected) {
      throw std::invalid_argument(message_number(i) + " has role " + std::string(chat_role_name(role)) +
                                  (previous ? " after " + with_article(*previous) + " message"
                                            : std::string(" as the first message")) +
                                  " (turns alternate user, assistant, starting with the user)");
    }
    any_assistant = any_assistant || role == ChatRole::assistant;
    previous = role;
  }
  if (needs_assistant && !any_assistant) throw std::invalid_argument("the conversation has no assistant turn");
  if (needs_assistant) {
    // A training record with nothing in a turn, or a last question never answered, is a broken record
    // (a failed export, a cut file), not data: it would train an empty reply or spend rows on nothing.
    for (size_t i = 0; i < messages.size(); ++i) {
      if (!messages[i].content.empty()) continue;
      throw std::invalid_argument(messages[i].role == ChatRole::assistant
                                      ? message_number(i) + " is an empty assistant reply (\"content\": \"\")"
                                      : message_number(i) + " (" + with_article(messages[i].role) +
                                            " message) has empty \"content\"");
    }
    if (messages.back().role == ChatRole::user) {
      throw std::invalid_argument("the conversation ends on a user turn (" + message_number(messages.size() - 1) +
                                  ") that no assistant reply answers");
    }
    bool any_trained = false;
    for (const ChatMessage& m : messages) any_trained = any_trained || (m.role == ChatRole::assistant && m.trained);
    if (!any_trained) throw std::invalid_argument("every assistant message has \"weight\": 0, so nothing is trained");
  }
}

void ChatFormat::append_text(std::string_view text, std::vector<int64_t>& ids) const {
  const std::vector<int64_t> encoded = codec_.encode_ordinary(text);
  ids.insert(ids.end(), encoded.begin(), encoded.end());
}

RenderedChat ChatFormat::render_turns(std::span<const ChatMessage> messages) const {
  RenderedChat out;
  auto push = [&out](int64_t id, bool trained) {
    out.ids.push_back(id);
    out.trained.push_back(trained ? 1 : 0);
  };
  push(tokens_.bos, false);
  std::string system;
  for (const ChatMessage& message : messages) {
    switch (message.role) {
      case ChatRole::system:
        system = message.content + std::string(kSystemSeparator);
        break;
      case ChatRole::user:
        push(tokens_.user_start, false);
        append_text(system + message.content, out.ids);
        system.clear();
        out.trained.resize(out.ids.size(), 0);
        push(tokens_.user_end, false);
        break;
      case ChatRole::assistant:
        // <|assistant_start|> is given (a prompt ends with it); the reply and its end are what is learnt.
        push(tokens_.assistant_start, false);
        append_text(message.content, out.ids);
        out.trained.resize(out.ids.size(), message.trained ? 1 : 0);
        push(tokens_.assistant_end, message.trained);
        break;
    }
  }
  return out;
}

RenderedChat ChatFormat::render_conversation(std::span<const ChatMessage> messages) const {
  check_conversation(messages, /*needs_assistant=*/true);
  return render_turns(messages);
}

std::vector<int64_t> ChatFormat::render_prompt(std::span<const ChatMessage> history, std::string_view user_message,
                                               std::string_view system) const {
  std::vector<ChatMessage> messages;
  const bool history_has_system = !history.empty() && history.front().role == ChatRole::system;
  if (!system.empty() && !history_has_system) messages.push_back({ChatRole::system, std::string(system)});
  messages.insert(messages.end(), history.begin(), history.end());
  messages.push_back({ChatRole::user, std::string(user_message)});
  check_conversation(messages, /*needs_assistant=*/false);
  std::vector<int64_t> ids = render_turns(messages).ids;
  ids.push_back(tokens_.assistant_start);
  return ids;
}

std::string ChatFormat::jinja_template() {
  // A namespace carries the system text into the next user turn (Jinja's loop scope would drop a plain set).
  return "{{- '<|bos|>' -}}"
         "{%- set ns = namespace(system='') -%}"
         "{%- for message in messages -%}"
         "{%- if message['role'] == 'system' -%}{%- set ns.system = message['content'] + '\n\n' -%}"
         "{%- elif message['role'] == 'user' -%}"
         "{{- '<|user_start|>' + ns.system + message['content'] + '<|user_end|>' -}}{%- set ns.system = '' -%}"
         "{%- elif message['role'] == 'assistant' -%}"
         "{{- '<|assistant_start|>' + message['content'] + '<|assistant_end|>' -}}"
         "{%- endif -%}"
         "{%- endfor -%}"
         "{%- if add_generation_prompt -%}{{- '<|assistant_start|>' -}}{%- endif -%}";
}

bool ChatFormat::is_special(int64_t id) const { return special_name(id).has_value(); }

std::optional<std::string_view> ChatFormat::special_name(int64_t id) const {
  const std::array<int64_t, kTokenNames.size()> ids = {tokens_.bos, tokens_.user_start, tokens_.user_end,
                                                        tokens_.assistant_start, tokens_.assistant_end};
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return kTokenNames[i];
  }
  return std::nullopt;
}

std::string ChatFormat::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  std::vector<int64_t> run;  // ordinary ids decoded together (a character may span tokens)
  for (int64_t id : ids) {
    if (const auto name = special_name(id)) {
      text += codec_.decode(run);
      run.clear();
      text += *name;
    } else {
      run.push_back(id);
    }
  }
  return text + codec_.decode(run);
}

std::string ChatFormat::record() const { return record_of(tokens_); }

std::string ChatFormat::record_of(const ChatSpecialTokens& t) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
  const std::array<int64_t, kTokenNames.size()> ids = {t.bos, t.user_start, t.user_end, t.assistant_start,
                                                        t.assistant_end};
  for (size_t i = 0; i < kTokenNames.size(); ++i) tokens[std::string(kTokenNames[i])] = ids[i];
  nlohmann::ordered_json record = {{"template", std::string(kTemplateName)},
                                   {"system", "before the first user message, then a blank line"},
                                   {"tokens", tokens}};
  return record.dump();
}

void ChatFormat::check_record(const std::string& text) const {
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument("its chat format record is not JSON");
  }
  if (!record.is_object() || !record.contains("template") || !record["template"].is_string() ||
      record["template"].get<std::string>() != kTemplateName) {
    throw std::invalid_argument("its chat format is not the '" + std::string(kTemplateName) +
                                "' template this build renders");
  }
  const nlohmann::json mine = nlohmann::json::parse(this->record())["tokens"];
  if (!record.contains("tokens") || record["tokens"] != mine) {
    throw std::invalid_argument("its chat tokens have other ids than this tokenizer gives them (" +
                                (record.contains("tokens") ? record["tokens"].dump() : std::string("none")) +
                                ", expected " + mine.dump() + ")");
  }
}

}  // namespace mygpt
