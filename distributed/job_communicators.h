#pragma once
// Opens the communicators of a job: a host one (MPI over CPU tensors: start-up checks, NCCL's
// bootstrap) and the one the trainer uses for the device's tensors (NCCL on CUDA, MPI on CPU).
// A process not started by an MPI launcher gets the local no-op backend for both.
#include <torch/torch.h>

#include <memory>

#include "distributed/communicator.h"
#include "distributed/mpi_world.h"

namespace mygpt {

class JobCommunicators {
 public:
  JobCommunicators(const MpiSession& mpi, const torch::Device& device, double timeout_seconds);
  Communicator& host() { return *host_; }
  Communicator& device() { return device_ ? *device_ : *host_; }

 private:
  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;  // empty when the host communicator serves the device too
};

// Every rank compares a fingerprint of its run configuration with rank 0's; on any difference all
// ranks throw std::invalid_argument, so the job refuses to start rather than train inconsistently.
void require_same_config_on_all_ranks(Communicator& comm, const std::string& config_text);

}  // namespace mygpt
