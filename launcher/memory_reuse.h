#pragma once
// Training allocates and frees the same tensors every step. glibc's malloc serves blocks above its mmap
// threshold (128 KiB, rising to at most 32 MiB) with fresh mmaps, unmaps them on free and trims the
// heap's free top: every step then faults its activations' pages in again and the kernel zeroes them.
// On nanoGPT's CPU Shakespeare configuration that was a fifth of the process's time in the kernel (perf,
// Intel Xeon) and 1.18M page faults in 200 steps (AMD EPYC); told to keep freed memory, 66k, about
// the start-up's. Debian's jemalloc faulted more than glibc with its default decay and as little only
// with decay off, for a library more to ship; mimalloc in between (docs/BENCHMARKS.md, "allocator").

namespace mygpt {

// Tells glibc's malloc to serve every block from its heap and never trim it (mallopt M_MMAP_MAX 0,
// M_TRIM_THRESHOLD -1), unless the environment already tunes malloc (MALLOC_*_ variables or
// glibc.malloc tunables): the user's choice stands. Returns whether it did.
// Call first thing in main, before large blocks are allocated.
bool keep_freed_memory_for_reuse();

}  // namespace mygpt
