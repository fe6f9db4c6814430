#pragma once
// Opens the communicators of a job: a host one (CPU tensors: start-up checks, NCCL's bootstrap) and the
// one the trainer uses for the device's tensors (NCCL on CUDA, the host one on CPU).
//   MPI launcher:              host MPI (rank-order sums, so --zero 1 is bit-identical to --zero 0)
//   torchrun, srun, variables: host Gloo over a c10d store rendezvous (store_rendezvous.h)
//   a plain process:           the local no-op backend for both
//   one rank on MPS, launched or not: the local backend (see trains_alone_on_device)
#include <torch/torch.h>

#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/job_session.h"

namespace mygpt {

class StoreRendezvous;

// Whether a job of `world_size` ranks on `device` trains alone, on the local backend, whatever launched it:
// one rank on MPS (mpirun -np 1, torchrun with one process), since MPI and Gloo take CPU tensors only and one
// rank has nothing to exchange. Several ranks on MPS (one a machine) are refused, std::invalid_argument: no
// backend here carries MPS tensors between machines.
bool trains_alone_on_device(int world_size, const torch::Device& device);

class JobCommunicators {
 public:
  // rendezvous: --rendezvous ("tcp" or "file:DIR"; only jobs started without MPI meet that way).
  // timeout_seconds: --comm-timeout (0: no limit), for the rendezvous and every collective.
  // verbose: --verbose, LibTorch's own warnings while the ranks meet are printed (else only our line).
  JobCommunicators(const JobSession& job, const torch::Device& device, double timeout_seconds,
                   const std::string& rendezvous, bool verbose = false);
  ~JobCommunicators();
  Communicator& host() { return *host_; }
  Communicator& device() { return device_ ? *device_ : *host_; }
  // How the ranks met, for the log: "tcp://host:port in 0.2 s"; empty without a store.
  const std::string& rendezvous_note() const { return rendezvous_note_; }

 private:
  std::unique_ptr<StoreRendezvous> rendezvous_;
  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;  // empty when the host communicator serves the device too
  std::string rendezvous_note_;
};

// Every rank compares a fingerprint of its run configuration with rank 0's; on any difference all
// ranks throw std::invalid_argument, so the job refuses to start rather than train inconsistently.
void require_same_config_on_all_ranks(Communicator& comm, const std::string& config_text);

}  // namespace mygpt
