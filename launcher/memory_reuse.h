#pragma once
// Training allocates and frees the same tensors every step. glibc's malloc serves blocks above its mmap
// threshold (128 KiB, rising to at most 32 MiB) with fresh mmaps, unmaps them on free and trims the
// heap's free top: every step then faults its activations' pages in again and the kernel zeroes them.
// On nanoGPT's CPU Shakespeare configuration that was a fifth of the process's time in the kernel (perf,
// Intel Xeon) and 1.18M page faults in 200 steps (AMD EPYC); told to keep freed memory, 66k, about
// the start-up's. Debian's jemalloc faulted more than glibc with its default decay and as little only
// with decay off, for a library more to ship; mimalloc in between (docs/BENCHMARKS.md, "allocator").
// The cost is peak RSS: freed blocks kept in a heap that is never trimmed fragment it (792 MiB against
// 655 with glibc's defaults for the small preset with GPT-2's vocabulary, batch 4 x 128, one of
// tests/plan_accuracy_test.py's configurations), which plan's estimate does not model yet. Until it does, `train --keep-freed-memory` asks for it and the default is glibc's.

namespace mygpt {

// Tells glibc's malloc to serve every block from its heap and never trim it (mallopt M_MMAP_MAX 0,
// M_TRIM_THRESHOLD -1), unless the environment already tunes malloc (MALLOC_*_ variables or
// glibc.malloc tunables): the user's choice stands. Returns whether it did.
// Call before the model and its step allocate.
bool keep_freed_memory_for_reuse();

// Hands the free memory of malloc's heaps back to the kernel (malloc_trim): called when training is done
// and its tensors are freed, so that what the process does after, while it ends, adds to the resident
// set of what is still in use, not to the peak of the training it kept. (Measured: LibTorch's CUDA
// libraries page ~120 MiB of their own in at exit, on a machine without a GPU too; with the heap still
// holding the training's peak, that became the process's peak resident set.)
void return_freed_memory();

}  // namespace mygpt
