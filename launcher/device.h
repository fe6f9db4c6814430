#pragma once
// Device choice, seeding and threads: the per-process runtime setup every command shares.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mygpt {

// The kind of device a process trains on ("cuda", "mps" or "cpu"), decided from what the machine has: "auto"
// prefers cuda > mps > cpu, except that several ranks on one machine never share its MPS device (MPS serves
// one process, and the ranks' communicators take CPU tensors): then "auto" is "cpu", and `note` says why.
// "mps" for several local ranks, a kind that is not there, or an unknown name: std::invalid_argument.
struct DeviceChoice {
  std::string kind;
  std::string note;  // "" or one line for rank 0 to print
};
DeviceChoice choose_device_kind(const std::string& spec, int local_size, bool cuda_available, bool mps_available);

// The device of choose_device_kind on this machine. "cuda" on a rank picks cuda:<local_rank> (see
// cuda_index_for_rank) and turns on TF32 for fp32 matmuls. `note`, where given, receives the choice's note.
torch::Device pick_device(const std::string& spec, int local_rank = 0, int local_size = 1, std::string* note = nullptr);

// Flags that only CUDA honours (named as given, e.g. "--attention flash") are refused on MPS, where they
// would be silently ignored: std::invalid_argument naming the first. Elsewhere nothing happens.
void refuse_cuda_only_flags(const torch::Device& device, const std::vector<std::string>& cuda_only_flags_given);

// The CUDA device index of a rank: its local rank when the node's ranks see enough GPUs, 0 when each
// rank sees exactly one (one GPU bound per task); otherwise std::invalid_argument (oversubscription).
int cuda_index_for_rank(int local_rank, int local_size, int visible_gpus);

// A thread count far above the machine's cores is a mistake, and an expensive one: 1000 threads die in
// libgomp, 100000 hang while being created. Refuses (std::invalid_argument naming `flag` and the core
// count) more than 4 threads a core or more than 1024, before any thread is started.
void require_sane_thread_count(const std::string& flag, int64_t threads, unsigned cores);

// Sets LibTorch's intra-op CPU threads: `threads`, or when 0 the node's cores divided by the ranks on
// it (at least one). Returns the count set.
int64_t set_cpu_threads(int64_t threads, int ranks_on_node = 1);

// Seeds the CPU generator and, where present, every CUDA device and MPS.
void seed_everything(uint64_t seed);

}  // namespace mygpt
