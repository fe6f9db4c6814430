#pragma once
// Which of LibTorch's scaled-dot-product attention kernels a run prefers. PyTorch's own order on CUDA
// is flash, memory-efficient, math, cuDNN; on Hopper cuDNN's kernel can be the fastest, so the choice
// is left to a flag and to measurement (scripts/bench_gpt2_gpu.sh) rather than fixed here.
#include <torch/types.h>

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
//
// On CUDA, PyTorch settles its default order lazily, at the first attention call of the process: on a
// Hopper or Blackwell GPU with cuDNN >= 9.9 it then puts cuDNN's kernel first, over any order set before
// (seen on an H100: --attention flash ran cuDNN's kernel). Given a CUDA device, this lets PyTorch settle
// first (one attention choice on a tiny tensor of that device), so that the preference set here holds and
// automatic means the order PyTorch chose for that GPU.
void prefer_attention_backend(AttentionBackend backend, const torch::Device& device = torch::kCPU);

}  // namespace mygpt
