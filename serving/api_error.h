#pragma once
// OpenAI's error object, {"error": {"message", "type", "param", "code"}}, with its HTTP status: what
// every refused request gets (the openai client raises BadRequestError, AuthenticationError,
// NotFoundError, RateLimitError... from the status and shows the message).
#include <stdexcept>
#include <string>

namespace mygpt {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type, std::string param = {}, std::string code = {})
      : std::runtime_error(std::move(message)),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;   // invalid_request_error, authentication_error, rate_limit_error, server_error
  std::string param;  // the request field at fault; empty: null
  std::string code;   // empty: null
};

// 400 invalid_request_error naming the field.
inline ApiError invalid_request(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

// The error object's JSON text.
std::string error_json(const ApiError& error);

}  // namespace mygpt
