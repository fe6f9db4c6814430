#include "common/host_memory.h"

#include <fstream>
#include <sstream>

#if defined(__APPLE__)
#include <mach/mach.h>
#include <sys/resource.h>
#include <sys/sysctl.h>
#endif

namespace mygpt {

#if defined(__APPLE__)

HostMemoryFigure host_available_memory() {
  vm_statistics64_data_t stats{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&stats), &count) !=
      KERN_SUCCESS) {
    return {};
  }
  vm_size_t page = 0;
  if (host_page_size(mach_host_self(), &page) != KERN_SUCCESS) return {};
  // What macOS reclaims without swapping: free pages, and inactive, purgeable and speculative ones.
  const double pages = static_cast<double>(stats.free_count) + stats.inactive_count + stats.purgeable_count +
                       stats.speculative_count;
  return {pages * static_cast<double>(page), "free, inactive, purgeable and speculative pages (host_statistics64)"};
}

int64_t resident_set_bytes() {
  mach_task_basic_info_data_t info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, reinterpret_cast<task_info_t>(&info), &count) != KERN_SUCCESS) {
    return 0;
  }
  return static_cast<int64_t>(info.resident_size);
}

int64_t peak_resident_set_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss);  // bytes on macOS (Linux counts KiB here)
}

#else

namespace {

// The number after `key` in /proc/self/status or /proc/meminfo, in bytes ("VmRSS:   1234 kB"); -1 if absent.
double proc_kib_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      std::istringstream fields(line.substr(key.size()));
      double kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  }
  return -1;
}

}  // namespace

HostMemoryFigure host_available_memory() {
  const double bytes = proc_kib_field("/proc/meminfo", "MemAvailable:");
  if (bytes < 0) return {};
  return {bytes, "MemAvailable in /proc/meminfo"};
}

int64_t resident_set_bytes() {
  const double bytes = proc_kib_field("/proc/self/status", "VmRSS:");
  return bytes < 0 ? 0 : static_cast<int64_t>(bytes);
}

int64_t peak_resident_set_bytes() {
  const double bytes = proc_kib_field("/proc/self/status", "VmHWM:");
  return bytes < 0 ? 0 : static_cast<int64_t>(bytes);
}

#endif

}  // namespace mygpt
