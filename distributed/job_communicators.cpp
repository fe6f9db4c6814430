#include "distributed/job_communicators.h"

#include <stdexcept>

#include "distributed/mpi_communicator.h"
#include "distributed/nccl_communicator.h"

namespace mygpt {

JobCommunicators::JobCommunicators(const MpiSession& mpi, const torch::Device& device, double timeout_seconds) {
  // Started by an MPI launcher, even one rank gets the real backends (mpirun -np 1 on one GPU runs the
  // NCCL path of a larger job: the MPI bootstrap, the communicator, bucket hooks, the watchdog).
  if (!mpi.world().uses_mpi) {
    host_ = std::make_unique<LocalCommunicator>();
    return;
  }
  host_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, mpi.thread_serialized());
  if (device.is_cuda()) {
    device_ = make_nccl_communicator(*host_, device.index(), timeout_seconds,
                                     [&mpi](const std::string& message) { mpi.fail_job(message, 1); });
  }
}

void require_same_config_on_all_ranks(Communicator& comm, const std::string& config_text) {
  if (comm.world_size() == 1) return;
  // FNV-1a: a stable hash (std::hash may differ between builds, and ranks may run different builds).
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : config_text) hash = (hash ^ c) * 1099511628211ULL;
  auto mine = torch::tensor({static_cast<int64_t>(hash)}, torch::kLong);
  auto rank0 = mine.clone();
  comm.broadcast(rank0, 0);
  auto differs = torch::tensor({static_cast<int64_t>(!torch::equal(mine, rank0))}, torch::kLong);
  comm.all_reduce(differs, ReduceOp::Max);
  if (differs.item<int64_t>() != 0) {
    throw std::invalid_argument(
        "the ranks were started with different configurations (options, data or build); "
        "every rank must run the same command");
  }
}

}  // namespace mygpt
