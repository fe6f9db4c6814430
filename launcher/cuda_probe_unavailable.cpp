// Stand-in for cuda_probe.cpp in builds without CUDA: no CUDA device can be chosen there.
#include "launcher/device_probe.h"

namespace mygpt {

std::string cuda_device_name(int) { return "cuda (not in this build)"; }
double cuda_peak_memory_mib(int) { return -1; }
double cuda_total_memory_bytes(int) { return 0; }
bool cuda_supports_bf16(int) { return false; }

}  // namespace mygpt
