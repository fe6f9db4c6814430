#include "serving/api_request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

namespace mygpt {
namespace {

using nlohmann::json;

std::string type_name(const json& v) { return v.type_name(); }

double number_in(const json& body, const char* field, double low, double high, bool low_open) {
  const json& v = body.at(field);
  if (!v.is_number()) throw invalid_request(std::string("'") + field + "' must be a number, not " + type_name(v), field);
  const double x = v.get<double>();
  if (!std::isfinite(x) || (low_open ? x <= low : x < low) || x > high) {
    throw invalid_request(std::string("'") + field + "' must be " + (low_open ? "above " : "at least ") +
                              json(low).dump() + " and at most " + json(high).dump() + ", got " + v.dump(),
                          field);
  }
  return x;
}

int64_t whole_number(const json& body, const char* field, int64_t low) {
  const json& v = body.at(field);
  if (!v.is_number_integer()) {
    throw invalid_request(std::string("'") + field + "' must be a whole number, not " + v.dump(), field);
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw invalid_request(std::string("'") + field + "' is too large: " + v.dump(), field);
  }
  const int64_t x = v.get<int64_t>();
  if (x < low) {
    throw invalid_request(std::string("'") + field + "' must be at least " + std::to_string(low) + ", got " + v.dump(),
                          field);
  }
  return x;
}

bool boolean(const json& body, const char* field) {
  const json& v = body.at(field);
  if (!v.is_boolean()) throw invalid_request(std::string("'") + field + "' must be true or false, not " + v.dump(), field);
  return v.get<bool>();
}

std::string text(const json& v, const std::string& field) {
  if (!v.is_string()) throw invalid_request("'" + field + "' must be a string, not " + type_name(v), field);
  return v.get<std::string>();
}

// A message's content: a string, or OpenAI's array of parts of which only text ones are understood.
std::string message_content(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_request("'" + field + "' must be a string or an array of text parts", field);
  std::string out;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part.at("text").is_string()) {
      throw invalid_request("'" + field + "': only parts {\"type\": \"text\", \"text\": ...} are understood", field);
    }
    out += part.at("text").get<std::string>();
  }
  return out;
}

void read_messages(const json& body, CompletionRequest& r) {
  if (!body.contains("messages")) throw invalid_request("'messages' is required", "messages");
  const json& messages = body.at("messages");
  if (!messages.is_array() || messages.empty()) {
    throw invalid_request("'messages' must be a non-empty array of messages", "messages");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m.contains("content")) {
      throw invalid_request("'" + at + "' must be an object with 'role' and 'content'", at);
    }
    std::string role = text(m.at("role"), at + ".role");
    // OpenAI's newer models take "developer" where older ones took "system"; clients send either.
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant") {
      throw invalid_request("'" + at + ".role' must be system, developer, user or assistant, not '" + role + "'",
                            at + ".role");
    }
    r.messages.emplace_back(role, message_content(m.at("content"), at + ".content"));
  }
  if (r.messages.back().first != "user") {
    throw invalid_request("the last message must be the user's: the reply answers it", "messages");
  }
}

void read_prompt(const json& body, CompletionRequest& r) {
  if (!body.contains("prompt")) throw invalid_request("'prompt' is required", "prompt");
  const json& prompt = body.at("prompt");
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
    r.prompt = prompt[0].get<std::string>();
  } else if (prompt.is_string()) {
    r.prompt = prompt.get<std::string>();
  } else {
    throw invalid_request("'prompt' must be a string (or an array of one string)", "prompt");
  }
  if (r.prompt.empty()) throw invalid_request("'prompt' must not be empty", "prompt");
}

void read_stop(const json& stop, CompletionRequest& r) {
  if (stop.is_string()) {
    r.stop = {stop.get<std::string>()};
  } else if (stop.is_array() && stop.size() <= 4) {
    for (const json& s : stop) r.stop.push_back(text(s, "stop"));
  } else {
    throw invalid_request("'stop' must be a string or an array of at most 4 strings", "stop");
  }
  for (const auto& s : r.stop) {
    if (s.empty()) throw invalid_request("'stop' strings must not be empty", "stop");
  }
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body_text, Endpoint endpoint) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {
    throw invalid_request(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw invalid_request("the body must be a JSON object");
  const bool chat = endpoint == Endpoint::chat_completions;
  // Fields this server honours, and those it accepts only at the value that changes nothing.
  static const std::set<std::string> common = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop",
                                               "n", "stream", "stream_options", "user", "frequency_penalty",
                                               "presence_penalty", "logprobs"};
  for (const auto& [key, value] : body.items()) {
    const bool known = common.count(key) != 0 || (chat && (key == "messages" || key == "max_completion_tokens")) ||
                       (!chat && (key == "prompt" || key == "echo" || key == "suffix"));
    if (!known) throw invalid_request("unrecognized request argument supplied: " + key, key);
  }
  // null is as absent (some clients send every field).
  auto given = [&](const char* field) { return body.contains(field) && !body.at(field).is_null(); };

  CompletionRequest r;
  r.endpoint = endpoint;
  if (!given("model")) throw invalid_request("'model' is required", "model");
  r.model = text(body.at("model"), "model");
  if (chat) {
    read_messages(body, r);
  } else {
    read_prompt(body, r);
  }
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    if (given(field)) r.max_tokens = whole_number(body, field, 1);
  }
  if (given("temperature")) r.temperature = number_in(body, "temperature", 0.0, 2.0, false);
  if (given("top_p")) r.top_p = number_in(body, "top_p", 0.0, 1.0, /*low_open=*/true);
  if (given("top_k")) r.top_k = whole_number(body, "top_k", 0);
  if (given("seed")) {
    if (!body.at("seed").is_number_integer()) throw invalid_request("'seed' must be a whole number", "seed");
    r.seed = body.at("seed").is_number_unsigned() ? body.at("seed").get<uint64_t>()
                                                  : static_cast<uint64_t>(body.at("seed").get<int64_t>());
  }
  if (given("stop")) read_stop(body.at("stop"), r);
  if (given("n") && whole_number(body, "n", 1) != 1) throw invalid_request("only n = 1 is supported", "n");
  if (given("stream")) r.stream = boolean(body, "stream");
  if (given("stream_options")) {
    const json& options = body.at("stream_options");
    if (!options.is_object()) throw invalid_request("'stream_options' must be an object", "stream_options");
    if (!r.stream) throw invalid_request("'stream_options' is only allowed with stream: true", "stream_options");
    if (options.contains("include_usage")) r.include_usage = boolean(options, "include_usage");
  }
  if (given("user")) text(body.at("user"), "user");
  for (const char* field : {"frequency_penalty", "presence_penalty"}) {
    if (given(field) && number_in(body, field, -2.0, 2.0, false) != 0.0) {
      throw invalid_request(std::string("'") + field + "' is not supported (only 0)", field);
    }
  }
  if (given("logprobs") && !(body.at("logprobs").is_boolean() && !body.at("logprobs").get<bool>()) &&
      !(body.at("logprobs").is_number_integer() && body.at("logprobs").get<int64_t>() == 0)) {
    throw invalid_request("'logprobs' is not supported", "logprobs");
  }
  if (given("echo") && boolean(body, "echo")) throw invalid_request("'echo' is not supported", "echo");
  if (given("suffix")) throw invalid_request("'suffix' is not supported", "suffix");
  return r;
}

}  // namespace mygpt
