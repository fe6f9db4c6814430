#include "common/duration.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "common/number_text.h"

namespace mygpt {

Duration parse_duration(const std::string& text) {
  const std::string forms = "give seconds (300) or hours, minutes and seconds with their units (300s, 5m, 1h30m)";
  const auto refuse = [&]() { return std::invalid_argument("'" + text + "' is not a duration: " + forms); };
  // A number alone is seconds; else each of h, m, s at most once, in that order, each after its number.
  const std::string units = "hms";
  const double unit_seconds[] = {3600, 60, 1};
  size_t next_unit = 0;  // units before this one are used (or skipped)
  double seconds = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = at;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) != 0)) ++end;
    if (end == at) throw refuse();  // no digits: a sign, a space, a unit without its number
    if (end < text.size() && text[end] == '.') {
      const size_t fraction = ++end;
      while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) != 0)) ++end;
      if (end == fraction) throw refuse();  // "1.s"
    }
    double number = 0;
    const auto [ptr, error] = std::from_chars(text.data() + at, text.data() + end, number);
    if (error != std::errc() || ptr != text.data() + end) throw refuse();
    if (end == text.size()) {  // a bare number: seconds, and only alone
      if (at != 0) throw refuse();
      seconds = number;
      at = end;
      break;
    }
    const size_t unit = units.find(text[end]);
    if (unit == std::string::npos || unit < next_unit) throw refuse();  // another letter, or out of order
    seconds += number * unit_seconds[unit];
    next_unit = unit + 1;
    at = end + 1;
  }
  if (text.empty()) throw refuse();
  if (!(seconds > 0)) throw std::invalid_argument("'" + text + "' is no time: a duration must be above zero");
  if (!(seconds <= kMaxDurationSeconds)) {
    throw std::invalid_argument("'" + text + "' is longer than " + number_text(kMaxDurationSeconds) +
                                " seconds (about 31 years)");
  }
  return {seconds};
}

std::string duration_text(const Duration& duration) {
  const double s = duration.seconds;
  if (s != std::floor(s) || !(s <= kMaxDurationSeconds)) return number_text(s) + "s";
  const auto whole = static_cast<long long>(s);
  const long long hours = whole / 3600, minutes = whole / 60 % 60, rest = whole % 60;
  std::string text;
  if (hours > 0) text += std::to_string(hours) + "h";
  if (minutes > 0) text += std::to_string(minutes) + "m";
  if (rest > 0 || text.empty()) text += std::to_string(rest) + "s";
  return text;
}

}  // namespace mygpt
