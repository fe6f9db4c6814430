// CUDA half of device_probe.h (compiled in CUDA builds only).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "launcher/device_probe.h"

namespace mygpt {

std::string cuda_device_name(int index) { return at::cuda::getDeviceProperties(index)->name; }

double cuda_total_memory_bytes(int index) {
  return static_cast<double>(at::cuda::getDeviceProperties(index)->totalGlobalMem);
}

bool cuda_supports_bf16(int index) { return at::cuda::getDeviceProperties(index)->major >= 8; }

double cuda_peak_memory_mib(int index) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  const auto& allocated = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  return static_cast<double>(allocated.peak) / (1024.0 * 1024.0);
}

}  // namespace mygpt
