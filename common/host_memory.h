#pragma once
// This host's memory as the operating system itself reports it: /proc on Linux; sysctl and the Mach
// kernel's statistics on macOS (which has no /proc). The one place that knows the difference.
#include <cstdint>
#include <string>

namespace mygpt {

// Memory the host can still hand out without swapping: Linux's MemAvailable; macOS's free, inactive,
// purgeable and speculative pages. bytes < 0 where the system does not say; `source` names the figure.
struct HostMemoryFigure {
  double bytes = -1;
  std::string source;
};
HostMemoryFigure host_available_memory();

// This process's resident set now and at its peak, in bytes; 0 where the system does not say.
int64_t resident_set_bytes();
int64_t peak_resident_set_bytes();

}  // namespace mygpt
