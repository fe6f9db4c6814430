#pragma once
// The process's place in the job and how the job ends when a rank cannot go on. The launcher is read
// from the environment (launch_environment.h): under an MPI launcher (mpirun, srun --mpi=...) MPI is
// initialized here and gives the ranks; under torchrun, srun without MPI or plain variables the ranks
// come from the variables and meet later through a c10d store (JobCommunicators); a plain start is one
// process. MPI is initialized only in the first case, so no other start needs mpirun.
#include <mpi.h>

#include <string>
#include <thread>

#include "distributed/launch_environment.h"

namespace mygpt {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this node
  int local_size = 1;
  int node_count = 1;
  bool uses_mpi = false;
  Launcher launcher = Launcher::none;
};

// "3 rank(s) on 2 node(s), unequally (1 on rank 0's node)", or "4 rank(s) on 2 node(s), 2 per node":
// local_size is this node's count alone, and torchrun may start a different number on each node.
std::string world_layout_text(const WorldInfo& world);

// Whether a thread may call MPI_Abort: the thread that initialized MPI may; another (the NCCL watchdog's)
// only under MPI_THREAD_MULTIPLE, since under a lower level the main thread may be inside MPI meanwhile.
bool may_call_mpi_from(int provided_thread_level, bool on_initializing_thread);

// RAII owner of the job's start: reads the launcher (std::invalid_argument for contradictory or
// incomplete variables), initializes MPI under an MPI launcher and finalizes it on destruction.
class JobSession {
 public:
  JobSession();
  ~JobSession();
  JobSession(const JobSession&) = delete;
  JobSession& operator=(const JobSession&) = delete;

  const WorldInfo& world() const { return world_; }
  const LaunchEnvironment& launch() const { return launch_; }
  // Whether MPI allows calls from a thread other than main (our communication thread needs it).
  bool thread_serialized() const { return thread_serialized_; }
  // Ends every rank of the job: MPI_Abort under MPI; otherwise this process exits non-zero, which makes
  // torchrun (and srun --kill-on-bad-exit) stop the others, and the others' collectives fail as soon as
  // this rank's connections close.
  [[noreturn]] void abort_job(int exit_code) const;
  // Prints the one-line error ("rank R: mygpt-ddp: error: ..." in a job of several ranks) and ends the
  // job; safe to call from any thread (the NCCL watchdog calls it). From a thread that may not call MPI
  // (may_call_mpi_from), the process ends at once with the exit code, and the launcher ends the job.
  [[noreturn]] void fail_job(const std::string& message, int exit_code) const;

 private:
  void start_mpi();

  LaunchEnvironment launch_;
  WorldInfo world_;
  bool thread_serialized_ = false;
  int thread_level_ = 0;  // MPI_THREAD_* granted by MPI_Init_thread
  std::thread::id initializing_thread_ = std::this_thread::get_id();
};

}  // namespace mygpt
