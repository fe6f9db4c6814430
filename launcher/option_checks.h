#pragma once
// Checks shared by many rows of the options tables; each throws std::invalid_argument naming the flag.
#include <cmath>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/file_io.h"
#include "launcher/option_row.h"

namespace mygpt {

struct PositiveCheck {
  template <typename T>
  void operator()(const std::string& flag, const T& v) const {
    if (!(v > 0)) {
      std::ostringstream value;
      value << v;
      throw std::invalid_argument("--" + flag + " must be positive, got " + value.str());
    }
  }
};
struct NonNegativeCheck {
  template <typename T>
  void operator()(const std::string& flag, const T& v) const {
    if (v < 0) {
      std::ostringstream value;
      value << v;
      throw std::invalid_argument("--" + flag + " must not be negative, got " + value.str());
    }
  }
};
inline constexpr PositiveCheck positive{};
inline constexpr NonNegativeCheck non_negative{};
inline std::function<void(const std::string&, const double&)> in_range(double lo, double hi, bool hi_inclusive) {
  return [=](const std::string& flag, const double& v) {
    if (v < lo || v > hi || (!hi_inclusive && v == hi)) {
      throw std::invalid_argument("--" + flag + " must be in [" + option_detail::number_text(lo) + ", " +
                                  option_detail::number_text(hi) + (hi_inclusive ? "]" : ")") + ", got " +
                                  option_detail::number_text(v));
    }
  };
}
// lo < v < hi, both ends open (NaN fails too).
inline std::function<void(const std::string&, const double&)> in_open_range(double lo, double hi) {
  return [=](const std::string& flag, const double& v) {
    if (!(v > lo && v < hi)) {
      throw std::invalid_argument("--" + flag + " must be above " + option_detail::number_text(lo) +
                                  (std::isinf(hi) ? "" : " and below " + option_detail::number_text(hi)) + ", got " +
                                  option_detail::number_text(v));
    }
  };
}
inline void not_empty(const std::string& flag, const std::string& v) {
  if (v.empty()) throw std::invalid_argument("--" + flag + " must not be empty");
}
// Text that a tokenizer reads (prompts) is UTF-8, as text files are (common/file_io.h).
inline void utf8_text(const std::string& flag, const std::string& v) { require_utf8(v, "--" + flag); }

}  // namespace mygpt
