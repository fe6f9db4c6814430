#pragma once
// Device choice, seeding and threads: the per-process runtime setup every command shares.
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace mygpt {

// "auto" prefers cuda > mps > cpu. "cuda" on a rank picks cuda:<local_rank>. A device that is not
// available (or fewer GPUs than local ranks) throws std::invalid_argument naming the problem.
torch::Device pick_device(const std::string& spec, int local_rank = 0, int local_size = 1);

// Seeds the CPU generator and, where present, every CUDA device and MPS.
void seed_everything(uint64_t seed);

}  // namespace mygpt
