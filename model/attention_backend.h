#pragma once
// Which of LibTorch's scaled-dot-product attention kernels a run prefers. PyTorch's own order on CUDA
// is flash, memory-efficient, math, cuDNN; on Hopper cuDNN's kernel can be the fastest, so the choice
// is left to a flag and to measurement (scripts/bench_gpt2_gpu.sh) rather than fixed here.
#include <string>
#include <utility>
#include <vector>

namespace mygpt {

enum class AttentionBackend { automatic, flash, efficient, cudnn, math };

// The flag's names, in --help order.
std::vector<std::pair<std::string, AttentionBackend>> attention_backend_names();

// Process-wide (LibTorch keeps this in its global context). automatic restores PyTorch's defaults;
// flash, efficient and cudnn move that kernel to the front of the priority order, so where it cannot
// run (CPU, a shape or dropout it lacks) the next one is taken; math allows only the reference kernel.
void prefer_attention_backend(AttentionBackend backend);

}  // namespace mygpt
