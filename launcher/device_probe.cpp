#include "launcher/device_probe.h"

#include <ATen/detail/MPSHooksInterface.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/host_memory.h"

namespace mygpt {

std::string device_name(const torch::Device& device) {
  if (device.is_cuda()) return cuda_device_name(device.index() < 0 ? 0 : device.index());
  return device.str();
}

Precision precision_for_device(Precision requested, const torch::Device& device) {
  // `plan` asks about a GPU it may not run on: a GPU that is not here is taken to have bf16.
  const int index = device.index() < 0 ? 0 : device.index();
  const bool gpu_here = device.is_cuda() && torch::cuda::is_available() && index < static_cast<int>(torch::cuda::device_count());
  const bool gpu_has_bf16 = !gpu_here || cuda_supports_bf16(index);
  const Precision resolved = resolve_precision(requested, device, gpu_has_bf16);
  // Likewise an MPS device asked about where there is none (`plan` on Linux): taken to be a current macOS.
  if (device.is_mps() && at::detail::getMPSHooks().hasMPS()) {
    const std::string refusal = mps_precision_refusal(resolved, at::detail::getMPSHooks().isOnMacOSorNewer(14, 0));
    if (!refusal.empty()) throw std::invalid_argument(refusal);
  }
  return resolved;
}

double peak_memory_mib(const torch::Device& device) {
  if (device.is_cuda()) return cuda_peak_memory_mib(device.index() < 0 ? 0 : device.index());
  if (device.is_mps() && at::detail::getMPSHooks().hasMPS()) {
    // LibTorch's MPS allocator tells only what its tensors hold now: the peak is of the moments asked.
    static std::atomic<size_t> peak{0};
    const size_t now = at::detail::getMPSHooks().getCurrentAllocatedMemory();
    size_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    return static_cast<double>(std::max(now, seen)) / (1024.0 * 1024.0);
  }
  const int64_t bytes = peak_resident_set_bytes();
  return bytes > 0 ? static_cast<double>(bytes) / (1024.0 * 1024.0) : -1;
}

double mps_recommended_memory_bytes() {
  if (!at::detail::getMPSHooks().hasMPS()) return -1;  // asked about an MPS this machine does not have
  return static_cast<double>(at::detail::getMPSHooks().getRecommendedMaxMemory());
}

double known_peak_tflops(const std::string& name) {
  // Dense (no sparsity) bf16 tensor-core peaks from the vendors' data sheets. Longer names first, so
  // "H100 PCIe" is not taken for the SXM part.
  static const std::vector<std::pair<std::string, double>> table = {
      {"H200", 989.0},     {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.0}, {"GH200", 989.0},
      {"B200", 2250.0},    {"A100", 312.0},      {"A10G", 125.0},     {"L40S", 362.0}, {"L4", 121.0},
      {"RTX 4090", 165.0}, {"RTX 3090", 71.0},   {"V100", 125.0},
  };
  for (const auto& [key, tflops] : table) {
    if (name.find(key) != std::string::npos) return tflops;
  }
  return 0;
}

}  // namespace mygpt
