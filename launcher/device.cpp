#include "launcher/device.h"

#include <torch/cuda.h>
#include <torch/mps.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace mygpt {

int cuda_index_for_rank(int local_rank, int local_size, int visible_gpus) {
  if (visible_gpus >= local_size) return local_rank;
  // Slurm's --gpus-per-task / --gpu-bind show each task one GPU of its own: cuda:0. Whether two ranks
  // still share one physical GPU is checked by the NCCL backend, which compares the GPUs' UUIDs.
  if (visible_gpus == 1) return 0;
  throw std::invalid_argument(std::to_string(local_size) + " ranks on this node but only " +
                              std::to_string(visible_gpus) +
                              " CUDA GPUs visible to each: start at most one rank per GPU");
}

DeviceChoice choose_device_kind(const std::string& spec, int local_size, bool cuda_available, bool mps_available) {
  if (spec == "auto") {
    if (cuda_available) return {"cuda", ""};
    if (mps_available && local_size > 1) {
      return {"cpu", "note: --device auto: " + std::to_string(local_size) +
                         " ranks on this machine cannot share its one MPS device: training on CPU (one rank "
                         "trains on MPS; --device cpu says this choice outright)"};
    }
    return {mps_available ? "mps" : "cpu", ""};
  }
  if (spec == "cpu") return {"cpu", ""};
  if (spec == "cuda") {
    if (!cuda_available) throw std::invalid_argument("device 'cuda' requested but no CUDA GPU is available");
    return {"cuda", ""};
  }
  if (spec == "mps") {
    if (!mps_available) throw std::invalid_argument("device 'mps' requested but MPS is not available");
    if (local_size > 1) {
      throw std::invalid_argument("--device mps: MPS serves one process, and this machine has " +
                                  std::to_string(local_size) +
                                  " ranks: start one rank (no mpirun, or -np 1), or use --device cpu");
    }
    return {"mps", ""};
  }
  throw std::invalid_argument("unknown device '" + spec + "' (expected auto, cuda, mps or cpu)");
}

torch::Device pick_device(const std::string& spec, int local_rank, int local_size, std::string* note) {
  // Asking for MPS only where CUDA is not the choice: the answer costs a Metal device probe.
  const bool cuda = torch::cuda::is_available();
  const bool mps = (spec == "mps" || (spec == "auto" && !cuda)) && torch::mps::is_available();
  const DeviceChoice choice = choose_device_kind(spec, local_size, cuda, mps);
  if (note != nullptr) *note = choice.note;
  if (choice.kind == "cpu") return torch::Device(torch::kCPU);
  if (choice.kind == "cuda") {
    const int index = cuda_index_for_rank(local_rank, local_size, static_cast<int>(torch::cuda::device_count()));
    // TF32 for fp32 matmuls, the same for every command (train, eval, generate).
    at::globalContext().setFloat32MatmulPrecision("high");
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return torch::Device(torch::kMPS);
}

void refuse_cuda_only_flags(const torch::Device& device, const std::vector<std::string>& cuda_only_flags_given) {
  if (!device.is_mps() || cuda_only_flags_given.empty()) return;
  throw std::invalid_argument(cuda_only_flags_given.front() +
                              " is for CUDA GPUs and would do nothing on --device mps: leave it out there");
}

void require_sane_thread_count(const std::string& flag, int64_t threads, unsigned cores) {
  constexpr int64_t kThreadsPerCore = 4, kMostThreads = 1024;
  // hardware_concurrency may not know the cores (0); then only the absolute bound applies.
  const int64_t limit = cores == 0 ? kMostThreads : std::min(kMostThreads, kThreadsPerCore * cores);
  if (threads > limit) {
    throw std::invalid_argument("--" + flag + " " + std::to_string(threads) + " is far more than this machine's " +
                                (cores == 0 ? std::string("cores") : std::to_string(cores) + " cores") +
                                " (at most " + std::to_string(limit) + "; 0 picks the cores divided by the ranks)");
  }
}

int64_t set_cpu_threads(int64_t threads, int ranks_on_node) {
  if (threads == 0) {
    threads = std::max<int64_t>(1, std::thread::hardware_concurrency() / std::max(1, ranks_on_node));
  }
  torch::set_num_threads(static_cast<int>(threads));
  return threads;
}

void seed_everything(uint64_t seed) {
  // at::manual_seed seeds the CPU generator, every CUDA device's and MPS's where they exist.
  torch::manual_seed(seed);
}

}  // namespace mygpt
