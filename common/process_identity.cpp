#include "common/process_identity.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace mygpt {
namespace {

#if defined(__linux__)
// The fields of /proc/PID/stat from field 3 (the state) on. The name in field 2 may hold spaces and
// parentheses, so they start after its last ')'. "" where the process is gone or the line is odd.
std::string fields_after_name(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return "";
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return "";
  return line.substr(close + 2);
}

// Field 22 of /proc/PID/stat (starttime, clock ticks after boot).
std::optional<unsigned long long> start_ticks(pid_t pid) {
  std::istringstream fields(fields_after_name(pid));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Field 3 of /proc/PID/stat, the state ('R', 'S', 'Z', ...); 0 where unknown.
char state_of(pid_t pid) {
  const std::string fields = fields_after_name(pid);
  return fields.empty() ? 0 : fields[0];
}
#endif

}  // namespace

bool process_has_exited(pid_t pid) {
#if defined(__linux__)
  const char state = state_of(pid);
  return state == 'Z' || state == 'X';
#else
  (void)pid;
  return false;
#endif
}

std::string boot_identity() {
#if defined(__linux__)
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (std::getline(in, id)) return id;
#endif
  return "";
}

std::string process_start_identity(pid_t pid) {
#if defined(__linux__)
  const std::string boot = boot_identity();
  const auto ticks = start_ticks(pid);
  if (!boot.empty() && ticks) return boot + "/" + std::to_string(*ticks);
#else
  (void)pid;
#endif
  return "";
}

std::optional<double> process_start_time(pid_t pid) {
#if defined(__linux__)
  const auto ticks = start_ticks(pid);
  std::ifstream in("/proc/stat");
  std::string key;
  long long boot_seconds = -1;
  while (in >> key) {
    if (key == "btime") {
      in >> boot_seconds;
      break;
    }
    in.ignore(1 << 20, '\n');
  }
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (ticks && boot_seconds >= 0 && ticks_per_second > 0) {
    return static_cast<double>(boot_seconds) + static_cast<double>(*ticks) / static_cast<double>(ticks_per_second);
  }
#else
  (void)pid;
#endif
  return std::nullopt;
}

}  // namespace mygpt
