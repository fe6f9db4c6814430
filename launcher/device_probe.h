#pragma once
// What the log reports about the device: its name, peak memory, and its peak bf16 throughput (MFU).
#include <torch/torch.h>

#include <string>

#include "model/mixed_precision.h"

namespace mygpt {

std::string device_name(const torch::Device& device);
// CUDA: the caching allocator's peak; MPS: the largest of what LibTorch's MPS allocator held at the
// moments asked (it keeps no peak); CPU: the process's peak resident set (Linux's VmHWM, macOS's
// ru_maxrss). -1 where the system does not say.
double peak_memory_mib(const torch::Device& device);
// The MPS device's recommended working set (Metal's recommendedMaxWorkingSetSize), for the memory check.
double mps_recommended_memory_bytes();
// Dense bf16 tensor-core peak in TFLOP/s for known GPUs (by name); 0 when unknown.
double known_peak_tflops(const std::string& device_name);

// --precision auto for this device: bf16 on a GPU with bf16 arithmetic, fp16 on an older GPU, fp32 on a CPU.
Precision precision_for_device(Precision requested, const torch::Device& device);

// Implemented by cuda_probe.cpp in CUDA builds, by cuda_probe_unavailable.cpp elsewhere.
std::string cuda_device_name(int index);
double cuda_peak_memory_mib(int index);
// The GPU's memory in bytes (its total, as the driver reports it); 0 where there is none.
double cuda_total_memory_bytes(int index);
// Whether the GPU computes in bf16 (compute capability 8.0 and up: A100, RTX 30xx and later).
bool cuda_supports_bf16(int index);

}  // namespace mygpt
