// The allocator policy main sets first: freed blocks stay in the process for the next step (no mmap per
// large block, no trimming), unless the environment tunes malloc itself. Each GoogleTest runs in a process
// of its own under CTest, so changing malloc's settings here touches no other test.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "launcher/memory_reuse.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mygpt::memory_reuse_test {
namespace {

extern "C" char** environ;

[[maybe_unused]] bool environment_has_malloc_settings() {  // (its tests are glibc's only)
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "MALLOC_", 7) == 0 || std::strncmp(*e, "GLIBC_TUNABLES=", 15) == 0) return true;
  }
  return false;
}

#if defined(__GLIBC__)
TEST(MemoryReuse, LargeBlocksComeFromTheHeapAndStayAfterFree) {
  if (environment_has_malloc_settings()) GTEST_SKIP() << "this environment tunes malloc (MALLOC_* or GLIBC_TUNABLES)";
  ASSERT_TRUE(keep_freed_memory_for_reuse());
  constexpr std::size_t kBlock = std::size_t{256} << 20;  // far above glibc's largest mmap threshold (32 MiB)
  const struct mallinfo2 before = mallinfo2();
  auto* block = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBlock);
  EXPECT_EQ(mallinfo2().hblkhd, before.hblkhd) << "a 256 MiB block was served by mmap: freeing it unmaps it";
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, before.arena + kBlock) << "the heap was trimmed after the free: the next step faults again";
  EXPECT_GE(after.fordblks, kBlock) << "the freed block is not kept for reuse";
}

// The VmRSS line of /proc/self/status, in bytes.
std::size_t resident_bytes() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return 0;
  char line[256];
  std::size_t kib = 0;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::sscanf(line, "VmRSS: %zu kB", &kib) == 1) break;
  }
  std::fclose(status);
  return kib * 1024;
}

// Once training is done the kept memory goes back: what the process does as it ends must not add to the
// training's peak resident set.
TEST(MemoryReuse, FreedMemoryGoesBackWhenAsked) {
  if (environment_has_malloc_settings()) GTEST_SKIP() << "this environment tunes malloc (MALLOC_* or GLIBC_TUNABLES)";
  ASSERT_TRUE(keep_freed_memory_for_reuse());
  constexpr std::size_t kBlock = std::size_t{256} << 20;
  auto* block = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBlock);
  // The block is never read: without this the compiler may drop the malloc, memset and free altogether.
  asm volatile("" : : "r"(block) : "memory");
  std::free(block);
  const std::size_t kept = resident_bytes();
  return_freed_memory();
  // All of the block's pages were touched and it is free: malloc_trim returns them but for malloc's top
  // pad (M_TOP_PAD, 128 KiB by default) and the page rounding; 1 MiB covers both.
  EXPECT_GE(kept - resident_bytes(), kBlock - (std::size_t{1} << 20)) << "the freed block is still resident";
}

TEST(MemoryReuse, PlanCountsTheKeptHeapOnlyWhereTrainKeepsIt) {
  if (environment_has_malloc_settings()) GTEST_SKIP() << "this environment tunes malloc (MALLOC_* or GLIBC_TUNABLES)";
  EXPECT_TRUE(keeps_freed_memory(true));
  EXPECT_FALSE(keeps_freed_memory(false));
  ASSERT_EQ(setenv("MALLOC_ARENA_MAX", "2", 1), 0);
  EXPECT_FALSE(keeps_freed_memory(true)) << "the user's malloc settings stand, so plan must not count the kept heap";
  unsetenv("MALLOC_ARENA_MAX");
}

TEST(MemoryReuse, TheUsersMallocSettingsStand) {
  ASSERT_EQ(setenv("MALLOC_ARENA_MAX", "2", 1), 0);
  EXPECT_FALSE(keep_freed_memory_for_reuse());
  unsetenv("MALLOC_ARENA_MAX");
  ASSERT_EQ(setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1000", 1), 0);
  EXPECT_FALSE(keep_freed_memory_for_reuse());
  unsetenv("GLIBC_TUNABLES");
}
#endif

}  // namespace
}  // namespace mygpt::memory_reuse_test
