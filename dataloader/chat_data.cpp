#include "dataloader/chat_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

#include "common/file_io.h"

namespace mygpt {
namespace {

std::string text_field(const nlohmann::json& object, const char* name, const std::string& where) {
  const auto it = object.find(name);
  if (it == object.end()) throw std::invalid_argument(where + " has no \"" + name + "\"");
  if (!it->is_string()) throw std::invalid_argument(where + "'s \"" + name + "\" is not a string");
  return it->get<std::string>();
}

std::vector<ChatMessage> messages_of(const nlohmann::json& record) {
  const auto messages = record.find("messages");
  if (messages != record.end() && (record.contains("prompt") || record.contains("completion"))) {
    throw std::invalid_argument(
        "the record has both \"messages\" and \"prompt\"/\"completion\": give one shape or the other");
  }
  if (messages != record.end()) {
    if (!messages->is_array()) throw std::invalid_argument("\"messages\" is not an array");
    std::vector<ChatMessage> out;
    for (size_t i = 0; i < messages->size(); ++i) {
      const nlohmann::json& m = (*messages)[i];
      const std::string where = "message " + std::to_string(i + 1);
      if (!m.is_object()) throw std::invalid_argument(where + " is not an object");
      const std::string role = text_field(m, "role", where);
      const std::optional<ChatRole> parsed = parse_chat_role(role);
      if (!parsed) {
        throw std::invalid_argument(where + " has unknown role '" + role + "' (expected system, user or assistant)");
      }
      ChatMessage message{*parsed, text_field(m, "content", where)};
      // OpenAI's fine-tuning format: "weight" 0 or 1 on an assistant message says whether to train on it.
      if (const auto weight = m.find("weight"); weight != m.end()) {
        if (*parsed != ChatRole::assistant) {
          throw std::invalid_argument(where + " has a \"weight\", which only an assistant message may have");
        }
        if (!weight->is_number_integer() || (weight->get<int64_t>() != 0 && weight->get<int64_t>() != 1)) {
          throw std::invalid_argument(where + "'s \"weight\" is " + weight->dump() + ", not 0 or 1");
        }
        message.trained = weight->get<int64_t>() == 1;
      }
      out.push_back(std::move(message));
    }
    return out;
  }
  if (record.contains("prompt") || record.contains("completion")) {
    std::vector<ChatMessage> pair = {{ChatRole::user, text_field(record, "prompt", "the record")},
                                     {ChatRole::assistant, text_field(record, "completion", "the record")}};
    // Named by the record's own fields (check_conversation would say "message 1").
    if (pair[0].content.empty()) throw std::invalid_argument("the record's \"prompt\" is empty");
    if (pair[1].content.empty()) throw std::invalid_argument("the record's \"completion\" is empty");
    return pair;
  }
  throw std::invalid_argument("the record has neither \"messages\" nor \"prompt\" and \"completion\"");
}

}  // namespace

std::vector<ChatMessage> parse_chat_record(std::string_view line) {
  if (const auto bad = first_invalid_utf8(line)) {
    throw std::invalid_argument("not UTF-8 (byte offset " + std::to_string(*bad) + " in the line)");
  }
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("not JSON: ") + e.what());
  }
  if (!record.is_object()) throw std::invalid_argument("not a JSON object");
  std::vector<ChatMessage> messages = messages_of(record);
  ChatFormat::check_conversation(messages, /*needs_assistant=*/true);
  return messages;
}

ChatExamples read_chat_examples(const std::filesystem::path& path, const ChatFormat& format, bool skip_bad_records) {
  // Bytes, not text: a line that is not UTF-8 is one bad record, not a bad file.
  const std::string text = read_whole_file(path, "conversations file");
  ChatExamples out;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t newline = text.find('\n', start);
    const size_t end = newline == std::string::npos ? text.size() : newline;
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    ++out.records;
    try {
      // A character the tokenizer lacks (a character-level model) makes the record bad too.
      out.conversations.push_back(format.render_conversation(parse_chat_record(line)));
    } catch (const std::invalid_argument& e) {
      if (!skip_bad_records) {
        throw std::invalid_argument(path.string() + ":" + std::to_string(line_number) + ": " + e.what() +
                                    " (--skip-bad-records skips such records)");
      }
      ++out.bad_skipped;
    }
  }
  if (out.conversations.empty()) {
    throw std::invalid_argument("conversations file '" + path.string() + "' has no good conversation (" +
                                std::to_string(out.records) + " record(s), " + std::to_string(out.bad_skipped) +
                                " bad)");
  }
  return out;
}

BlockConversations cut_to_block(const std::vector<RenderedChat>& conversations, int64_t max_tokens) {
  BlockConversations out;
  for (RenderedChat chat : conversations) {
    if (static_cast<int64_t>(chat.ids.size()) > max_tokens) {
      ++out.cut;
      chat.ids.resize(static_cast<size_t>(max_tokens));
      chat.trained.resize(static_cast<size_t>(max_tokens));
    }
    chat.trained[0] = 0;  // the first id is never a target
    if (chat.trained_count() == 0) {
      ++out.nothing_left;
      continue;
    }
    out.conversations.push_back(std::move(chat));
  }
  return out;
}

size_t conversations_kept(const std::vector<RenderedChat>& conversations, int64_t max_tokens) {
  size_t kept = 0;
  for (const RenderedChat& chat : conversations) {
    // The first id is never a target (cut_to_block clears it).
    const auto end = std::min(chat.trained.size(), static_cast<size_t>(max_tokens));
    if (end < 2) continue;
    kept += std::find(chat.trained.begin() + 1, chat.trained.begin() + static_cast<std::ptrdiff_t>(end), 1) !=
            chat.trained.begin() + static_cast<std::ptrdiff_t>(end);
  }
  return kept;
}

std::string BlockConversations::note(const std::string& what, int64_t seq_len) const {
  if (cut == 0) return "";
  std::string line = "note: " + what + ": " + std::to_string(cut) + " conversation(s) longer than --seq-len " +
                     std::to_string(seq_len) + " + 1 tokens were cut (their ends are not trained on)";
  if (nothing_left > 0) {
    line += ", " + std::to_string(nothing_left) + " of them before any assistant token, so they are left out";
  }
  return line;
}

}  // namespace mygpt
