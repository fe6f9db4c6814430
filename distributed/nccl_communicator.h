#pragma once
// Communicator for CUDA tensors over NCCL, bootstrapped through MPI. Built only where a CUDA LibTorch
// and nccl.h are found; elsewhere make_nccl_communicator throws (nccl_unavailable.cpp).
#include <functional>
#include <memory>
#include <string>

#include "distributed/communicator.h"

namespace mygpt {

// bootstrap: a communicator over the same ranks (MPI), used to share NCCL's unique id.
// timeout_seconds: how long a collective may take before the job is declared dead (0: wait forever).
// on_failure: called from the watchdog thread with a one-line message when a collective times out or
// NCCL reports an error; it should end the job (JobSession::fail_job), since the communicator is gone.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device_index, double timeout_seconds,
                                                     std::function<void(const std::string&)> on_failure);

}  // namespace mygpt
