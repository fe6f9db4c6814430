#pragma once
// Progress of long work (prepare's tokenizing, a full HellaSwag or validation pass): units done out of a
// total, the rate and the time left. On a terminal one line redrawn in place; in a log file (not a
// terminal) a whole line every few seconds, so a job's log shows it is alive. Silent when quiet.
//
// MYGPT_PROGRESS_SECONDS sets the interval between log lines (default 10; 0: every update), which is
// what tests use to see progress lines from short work.
#include <chrono>
#include <ostream>
#include <string>

namespace mygpt {

class Progress {
 public:
  // what: the line's prefix ("prepare"); unit: what is counted ("MB", "examples").
  Progress(std::string what, double total, std::string unit, bool quiet, std::ostream& out);
  // Reports `done` (and extra text such as a running accuracy) when a line is due.
  void update(double done, const std::string& extra = "");
  // Whether update would print now (so that a caller updating per item formats its extra text only then).
  bool due() const;
  // Ends the redrawn line on a terminal; nothing in a log (the caller prints its result).
  void finish();

 private:
  std::string line(double done, const std::string& extra) const;

  std::string what_, unit_;
  double total_;
  bool quiet_, terminal_;
  double interval_s_;
  std::ostream& out_;
  std::chrono::steady_clock::time_point start_, last_;
  bool drew_ = false;
};

}  // namespace mygpt
