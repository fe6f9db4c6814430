// `serve`'s request bodies (serving/api_request.h): the fuzzer's bytes as the body of
// /v1/chat/completions or /v1/completions (the first byte picks which). A body is either a request or
// ApiError with status 400; its error object (serving/api_response.h) must be JSON whatever bytes the
// message quotes.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "serving/api_request.h"
#include "serving/api_response.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint = (data[0] & 1) != 0 ? mygpt::Endpoint::completions : mygpt::Endpoint::chat_completions;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const mygpt::CompletionRequest request = mygpt::parse_completion_request(body, endpoint);
    if (request.model.empty() && request.messages.empty() && request.prompt.empty()) std::abort();
    if (request.stop.size() > 4) std::abort();
  } catch (const mygpt::ApiError& e) {
    if (e.status != 400) std::abort();
    if (!nlohmann::json::accept(mygpt::error_json(e))) std::abort();
  }
  return 0;
}
