#include "launcher/memory_reuse.h"

#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

extern char** environ;

namespace mygpt {
namespace {

// Only glibc's malloc is tuned here (macOS's libc has its own policy): elsewhere this is unused.
[[maybe_unused]] bool environment_tunes_malloc() {
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* e = *entry;
    if (std::strncmp(e, "MALLOC_", 7) == 0) return true;
    if (std::strncmp(e, "GLIBC_TUNABLES=", 15) == 0 && std::strstr(e, "glibc.malloc.") != nullptr) return true;
  }
  return false;
}

}  // namespace

bool keeps_freed_memory([[maybe_unused]] bool asked) {
#if defined(__GLIBC__)
  return asked && !environment_tunes_malloc();
#else
  return false;
#endif
}

bool keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  if (!keeps_freed_memory(/*asked=*/true)) return false;  // one rule for train and for plan's estimate
  // Both return 1 on success; a libc that refuses leaves its defaults, which are correct, only slower.
  // (With another allocator preloaded these tune glibc's unused one: harmless.)
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, -1) == 1;
#else
  return false;  // other C libraries keep their own policy
#endif
}

void return_freed_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace mygpt
