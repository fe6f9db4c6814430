#include "distributed/rank_zero_reports.h"

#include <stdexcept>

namespace mygpt {

namespace {

int exit_code_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::invalid_argument&) {
    return 2;
  } catch (...) {
    return 1;
  }
}

}  // namespace

void share_rank_zero_outcome(Communicator& comm, const std::exception_ptr& rank_zero_failure) {
  const bool failed_here = comm.rank() == 0 && rank_zero_failure != nullptr;
  if (comm.world_size() == 1) {
    if (failed_here) std::rethrow_exception(rank_zero_failure);
    return;
  }
  auto code = torch::tensor({static_cast<int64_t>(failed_here ? exit_code_of(rank_zero_failure) : 0)}, torch::kLong);
  comm.broadcast(code, 0);
  const int exit_code = static_cast<int>(code.item<int64_t>());
  if (exit_code == 0) return;
  if (comm.rank() == 0) std::rethrow_exception(rank_zero_failure);
  end_as_rank_zero_reports(comm, exit_code);
}

void end_as_rank_zero_reports(Communicator& comm, int exit_code) {
  try {
    comm.barrier();  // rank 0 never comes: this ends when rank 0 ends the job
  } catch (...) {
    // Its connections closed: rank 0 has reported and gone.
  }
  throw EndedByRankZero(exit_code);
}

}  // namespace mygpt
