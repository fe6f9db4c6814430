#include "dataloader/chat_format.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace mygpt {
namespace {

// nanochat's way with a system prompt: no tokens of its own, its text before the first user message's.
constexpr std::string_view kSystemSeparator = "\n\n";

std::string message_number(size_t index) { return "message " + std::to_string(index + 1); }

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
  const int64_t first = codec.vocab_size();
  const int64_t needed = first + static_cast<int64_t>(kTokenNames.size());
  if (model_vocab_size < needed) {
    throw std::invalid_argument("the chat format needs " + std::to_string(kTokenNames.size()) +
                                " special token ids after the tokenizer's " + std::to_string(first) +
                                ", so a model of at least " + std::to_string(needed) + " vocabulary rows; this one has " +
                                std::to_string(model_vocab_size));
  }
  tokens_ = {first, first + 1, first + 2, first + 3, first + 4};
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
                                  (previous ? " after a " + std::string(chat_role_name(*previous)) + " message"
                                            : std::string(" as the first message")) +
                                  " (turns alternate user, assistant, starting with the user)");
    }
    any_assistant = any_assistant || role == ChatRole::assistant;
    previous = role;
  }
  if (needs_assistant && !any_assistant) throw std::invalid_argument("the conversation has no assistant turn");
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
        out.trained.resize(out.ids.size(), 1);
        push(tokens_.assistant_end, true);
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

bool ChatFormat::is_special(int64_t id) const {
  return id >= tokens_.bos && id < tokens_.bos + static_cast<int64_t>(kTokenNames.size());
}

std::optional<std::string_view> ChatFormat::special_name(int64_t id) const {
  if (!is_special(id)) return std::nullopt;
  return kTokenNames[static_cast<size_t>(id - tokens_.bos)];
}

std::string ChatFormat::record() const {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
  for (size_t i = 0; i < kTokenNames.size(); ++i) {
    tokens[std::string(kTokenNames[i])] = tokens_.bos + static_cast<int64_t>(i);
  }
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
