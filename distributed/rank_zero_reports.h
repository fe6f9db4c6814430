#pragma once
// A failure that every rank of a job knows of alike (a refusal rank 0 decided, a check every rank computed
// the same way) is one failure: rank 0 reports it, in one line, and the other ranks end with its exit code
// and no line of their own. Before, rank 0's refusal of a held --out came with rank 1's "Gloo broadcast
// failed ... Connection closed by peer" (issue 64): rank 1 learned of it only by losing its peer.
//
// The other ranks wait for rank 0 first: in a barrier that rank 0 never joins, which ends when rank 0 ends
// the job (MPI_Abort after its line; without MPI its exit closes its connections, and torchrun or srun
// --kill-on-bad-exit end the rest). Ending first, they could make the launcher kill rank 0 before its line
// is out.
#include <exception>
#include <string>

#include "distributed/communicator.h"

namespace mygpt {

// Thrown on the ranks other than 0: main ends the process with exit_code() and prints nothing.
class EndedByRankZero : public std::exception {
 public:
  explicit EndedByRankZero(int exit_code) : exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }
  const char* what() const noexcept override { return "rank 0 reported the failure"; }

 private:
  int exit_code_;
};

// Every rank calls this at the same point; rank 0 passes what it failed with (null: nothing), the others
// null. When rank 0 failed, rank 0 rethrows its failure and the others wait for it and throw
// EndedByRankZero with its exit code (2 for std::invalid_argument, a bad input; else 1).
void share_rank_zero_outcome(Communicator& comm, const std::exception_ptr& rank_zero_failure);

// On a rank other than 0, for a failure every rank found alike and rank 0 reports: waits for rank 0 to end
// the job, then throws EndedByRankZero(exit_code).
[[noreturn]] void end_as_rank_zero_reports(Communicator& comm, int exit_code);

}  // namespace mygpt
