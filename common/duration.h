#pragma once
// A span of wall-clock time as a person writes it: seconds (300), or hours, minutes and seconds with their
// units (300s, 5m, 1h30m, 1.5h). train --time-budget reads one; checkpoints and run.json keep its text.
#include <string>

namespace mygpt {

struct Duration {
  double seconds = 0;  // above zero, at most kMaxDurationSeconds
};

// About 31 years: far beyond any run, and well inside an int64 count of microseconds (trainer/time_budget.h).
inline constexpr double kMaxDurationSeconds = 1e9;

// Throws std::invalid_argument naming the text and the forms it takes (the caller names the option).
Duration parse_duration(const std::string& text);
// The text parse_duration reads back as the same duration: whole seconds as hours, minutes and seconds
// (5400 -> "1h30m", 300 -> "5m", 45 -> "45s"), others as seconds ("1.5s").
std::string duration_text(const Duration& duration);

}  // namespace mygpt
