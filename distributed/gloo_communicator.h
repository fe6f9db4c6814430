#pragma once
// Communicator for CPU tensors over Gloo (LibTorch's c10d::ProcessGroupGloo), for ranks that met through
// a c10d store instead of MPI (torchrun, srun without MPI, plain variables). Collectives run on Gloo's
// own threads, so a gradient bucket's all-reduce overlaps backward as under MPI. A peer that dies closes
// its sockets and the collectives waiting on it fail at once; one that stalls fails them after `timeout`.
// Built where Gloo's headers were found (Debian's libgloo-dev; the library itself is the copy inside
// libtorch); elsewhere make_gloo_communicator throws (gloo_unavailable.cpp).
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "distributed/communicator.h"

namespace mygpt {

std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int world_size, std::chrono::milliseconds timeout);

}  // namespace mygpt
