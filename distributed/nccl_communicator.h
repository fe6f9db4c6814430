#pragma once
// Communicator for CUDA tensors over NCCL, bootstrapped through MPI. Built only where a CUDA LibTorch
// and nccl.h are found; elsewhere make_nccl_communicator throws (nccl_unavailable.cpp).
#include <memory>

#include "distributed/mpi_communicator.h"

namespace mygpt {

// bootstrap: an MPI communicator over the same ranks, used to share NCCL's unique id.
// timeout_seconds: how long a collective may take before the job is declared dead (0: wait forever).
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device_index, double timeout_seconds);

}  // namespace mygpt
