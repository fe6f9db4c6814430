#pragma once
// The one way a double is shown to a person: the shortest text that reads back as the same double (1e-06, not
// 9.9999999999999995e-07). --help, option messages, the options' "name=value" form and the model's architecture
// line all use it, so they agree.
#include <charconv>
#include <string>

namespace mygpt {

inline std::string number_text(double v) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

}  // namespace mygpt
