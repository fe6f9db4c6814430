#pragma once
// Training allocates and frees the same tensors every step. glibc's malloc serves blocks above its mmap
// threshold (128 KiB, rising to at most 32 MiB) with fresh mmaps, unmaps them on free and trims the
// heap's free top: every step then faults its activations' pages in again and the kernel zeroes them.
// On nanoGPT's CPU Shakespeare configuration that was a fifth of the process's time in the kernel (perf,
// Intel Xeon) and 1.18M page faults in 200 steps (AMD EPYC); told to keep freed memory, 66k, about
// the start-up's. Debian's jemalloc faulted more than glibc with its default decay and as little only
// with decay off, for a library more to ship; mimalloc in between (docs/benchmarks-log.md, "allocator").
// So `train` keeps freed memory by default on glibc (--keep-freed-memory false restores glibc's policy).
// The cost is a little peak RSS, which plan counts ("kept heap" in trainer/memory_estimate.cpp): the
// never-trimmed heap ends about one block above what glibc's defaults reach, the largest block a step
// frees and allocates again (63 MiB for the small preset with GPT-2's vocabulary, whose largest is the
// fused loss's 64 MiB chunk of logits; within +-35 MiB of glibc's peak where no block is that large).
// A fixed mmap threshold (32 MiB) with no trimming, which leaves the largest blocks to mmap, saved at
// most 19 MiB of peak RSS in tests/plan_accuracy_test.py's configurations (11 more in one) but faults
// those blocks in again every step (45% more page faults for that small preset and GPT-2 124M): not
// worth their time.

namespace mygpt {

// Tells glibc's malloc to serve every block from its heap and never trim it (mallopt M_MMAP_MAX 0,
// M_TRIM_THRESHOLD -1), unless the environment already tunes malloc (MALLOC_*_ variables or
// glibc.malloc tunables): the user's choice stands. Returns whether it did.
// Call before the model and its step allocate.
bool keep_freed_memory_for_reuse();

// Whether a process given --keep-freed-memory `asked` keeps freed memory, as keep_freed_memory_for_reuse
// decides it: asked, glibc, and no malloc settings in the environment. plan's estimate counts the kept
// heap's extra memory only then (trainer/memory_estimate.h).
bool keeps_freed_memory(bool asked);

// Hands the free memory of malloc's heaps back to the kernel (malloc_trim): called when training is done
// and its tensors are freed, so that what the process does after, while it ends, adds to the resident
// set of what is still in use, not to the peak of the training it kept. (Measured: LibTorch's CUDA
// libraries page ~120 MiB of their own in at exit, on a machine without a GPU too; with the heap still
// holding the training's peak, that became the process's peak resident set.)
void return_freed_memory();

}  // namespace mygpt
