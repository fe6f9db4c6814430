#include "common/progress.h"

#include <cmath>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "common/strprintf.h"

namespace mygpt {
namespace {

double interval_from_environment(bool terminal) {
  if (const char* value = std::getenv("MYGPT_PROGRESS_SECONDS")) {
    char* end = nullptr;
    const double seconds = std::strtod(value, &end);
    if (end != value && seconds >= 0) return seconds;
  }
  return terminal ? 0.2 : 10.0;
}

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds));
  return strprintf("%lldh%02lldm%02llds", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace

Progress::Progress(std::string what, double total, std::string unit, bool quiet, std::ostream& out)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      quiet_(quiet),
      // Only std::cout can be a terminal here; any other stream is a log.
      terminal_(&out == &std::cout && ::isatty(STDOUT_FILENO) == 1),
      interval_s_(interval_from_environment(terminal_)),
      out_(out),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

std::string Progress::line(double done, const std::string& extra) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  // Counted things (examples, batches) print as integers, sizes (MB) with a decimal.
  const char* format = unit_ != "MB" ? "%s: %.0f/%.0f %s" : "%s: %.1f/%.1f %s";
  std::string text = strprintf(format, what_.c_str(), done, total_, unit_.c_str());
  if (total_ > 0) text += strprintf(" (%.0f%%)", 100.0 * done / total_);
  text += strprintf(", %.1f %s/s", rate, unit_.c_str());
  if (rate > 0 && total_ > done) text += ", eta " + clock_text((total_ - done) / rate);
  if (!extra.empty()) text += ", " + extra;
  return text;
}

bool Progress::due() const {
  return !quiet_ && std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count() >= interval_s_;
}

void Progress::update(double done, const std::string& extra) {
  if (!due()) return;
  last_ = std::chrono::steady_clock::now();
  if (terminal_) {
    out_ << "\r\033[K" << line(done, extra) << std::flush;  // redrawn in place
    drew_ = true;
  } else {
    out_ << line(done, extra) << std::endl;
  }
}

void Progress::finish() {
  if (drew_) out_ << "\r\033[K" << std::flush;  // the result line takes its place
  drew_ = false;
}

}  // namespace mygpt
