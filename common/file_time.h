#pragma once
// A file's modification time from its stat, on Linux and macOS alike: the one place that knows the field's
// two names (POSIX.1-2008's st_mtim on Linux; Darwin keeps st_mtimespec).
#include <sys/stat.h>

#include <ctime>

namespace mygpt {

inline timespec modification_time(const struct stat& info) {
#if defined(__APPLE__)
  return info.st_mtimespec;
#else
  return info.st_mtim;
#endif
}

}  // namespace mygpt
