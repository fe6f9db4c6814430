#include "serving/api_response.h"

#include <nlohmann/json.hpp>

namespace mygpt {
namespace {

using nlohmann::json;

json usage_object(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

bool is_chat(const ResponseHead& head) { return head.endpoint == Endpoint::chat_completions; }

json frame(const ResponseHead& head, bool chunk) {
  const char* object = is_chat(head) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", head.id}, {"object", object}, {"created", head.created}, {"model", head.model}};
}

// One choice of a chunk: a chat delta, or a completion's text; finish_reason null until the last.
json chunk_choice(const ResponseHead& head, const json& delta_or_text, const json& finish_reason) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  choice[is_chat(head) ? "delta" : "text"] = delta_or_text;
  return choice;
}

// Invalid UTF-8 cannot reach here (replies are decoded whole characters), but a dump must never throw.
std::string event(const json& payload) {
  return "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json null_or(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

}  // namespace

std::string error_json(const ApiError& error) {
  return json{{"error",
               {{"message", error.what()},
                {"type", error.type},
                {"param", null_or(error.param)},
                {"code", null_or(error.code)}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string completion_json(const ResponseHead& head, const std::string& text, const std::string& finish_reason,
                            const Usage& usage) {
  json out = frame(head, /*chunk=*/false);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  if (is_chat(head)) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  out["choices"] = json::array({choice});
  out["usage"] = usage_object(usage);
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string role_event(const ResponseHead& head) {
  json out = frame(head, true);
  out["choices"] = json::array({chunk_choice(head, json{{"role", "assistant"}, {"content", ""}}, nullptr)});
  return event(out);
}

std::string text_event(const ResponseHead& head, const std::string& text) {
  json out = frame(head, true);
  out["choices"] = json::array({chunk_choice(head, is_chat(head) ? json{{"content", text}} : json(text), nullptr)});
  return event(out);
}

std::string finish_event(const ResponseHead& head, const std::string& finish_reason) {
  json out = frame(head, true);
  out["choices"] = json::array({chunk_choice(head, is_chat(head) ? json::object() : json(""), finish_reason)});
  return event(out);
}

std::string usage_event(const ResponseHead& head, const Usage& usage) {
  json out = frame(head, true);
  out["choices"] = json::array();
  out["usage"] = usage_object(usage);
  return event(out);
}

std::string error_event(const ApiError& error) { return "data: " + error_json(error) + "\n\n"; }

std::string models_json(const std::string& model, int64_t created) {
  return json{{"object", "list"},
              {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "mygpt-ddp"}}})}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace mygpt
