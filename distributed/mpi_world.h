#pragma once
// The process's place in the job: started by an MPI launcher (Open MPI's mpirun, Slurm's srun with
// PMIx/PMI2) or plainly. MPI is initialized only in the first case, so a plain start needs no mpirun.
#include <mpi.h>

#include <string>
#include <thread>

namespace mygpt {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this node
  int local_size = 1;
  int node_count = 1;
  bool uses_mpi = false;
};

// True when launcher variables say this process is one rank of an MPI job.
bool started_by_mpi_launcher();

// Whether a thread may call MPI_Abort: the thread that initialized MPI may; another (the NCCL watchdog's)
// only under MPI_THREAD_MULTIPLE, since under a lower level the main thread may be inside MPI meanwhile.
bool may_call_mpi_from(int provided_thread_level, bool on_initializing_thread);

// RAII owner of MPI: initializes it (when started by a launcher) and finalizes it on destruction.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  const WorldInfo& world() const { return world_; }
  // Whether MPI allows calls from a thread other than main (our communication thread needs it).
  bool thread_serialized() const { return thread_serialized_; }
  // Kills every rank of the job; used when this rank cannot go on, so that no peer waits forever.
  [[noreturn]] void abort_job(int exit_code) const;
  // Prints the one-line error ("rank R: mygpt-ddp: error: ..." in a job of several ranks) and ends the
  // job; safe to call from any thread (the NCCL watchdog calls it). From a thread that may not call MPI
  // (may_call_mpi_from), the process ends at once with the exit code, and the launcher ends the job.
  [[noreturn]] void fail_job(const std::string& message, int exit_code) const;

 private:
  WorldInfo world_;
  bool thread_serialized_ = false;
  int thread_level_ = 0;  // MPI_THREAD_* granted by MPI_Init_thread
  std::thread::id initializing_thread_ = std::this_thread::get_id();
};

}  // namespace mygpt
