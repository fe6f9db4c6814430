#include "distributed/job_session.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mygpt {

// Long enough for a launcher's I/O forwarding to pass a line on (it polls its pipes continuously), short
// against a job's end: the other ranks are killed after it anyway.
constexpr std::chrono::milliseconds kLineBeforeAbort{300};

bool may_call_mpi_from(int provided_thread_level, bool on_initializing_thread) {
  return on_initializing_thread || provided_thread_level >= MPI_THREAD_MULTIPLE;
}

JobSession::JobSession() : launch_(detect_launch()) {
  world_.launcher = launch_.launcher;
  if (launch_.launcher == Launcher::mpi) {
    start_mpi();
    return;
  }
  world_.rank = launch_.rank;
  world_.world_size = launch_.world_size;
  world_.local_rank = launch_.local_rank;
  world_.local_size = launch_.local_world_size;
  world_.node_count = launch_.node_count;
}

void JobSession::start_mpi() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    throw std::runtime_error("MPI_Init_thread failed");
  }
  thread_serialized_ = provided >= MPI_THREAD_SERIALIZED;
  thread_level_ = provided;
  world_.uses_mpi = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_.world_size);
  // A launcher's variables that disagree with the world MPI started were set by hand (exported in a
  // shell, or left from another job): a process started alone would train as a world of one while its
  // variables promise a larger one.
  for (const auto& [size_var, rank_var] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                           std::pair{"PMI_SIZE", "PMI_RANK"}}) {
    for (const auto& [var, value] : {std::pair{size_var, world_.world_size}, std::pair{rank_var, world_.rank}}) {
      const char* set = std::getenv(var);
      if (set == nullptr || std::string(set) == std::to_string(value)) continue;
      MPI_Finalize();
      throw std::invalid_argument(std::string(var) + " is '" + set + "' but MPI started this process as rank " +
                                  std::to_string(world_.rank) + " of " + std::to_string(world_.world_size) +
                                  ": the variable was not set by the launcher; start the job with mpirun or srun, "
                                  "or unset it");
    }
  }
  // Ranks that share memory share a node: this holds under any launcher, unlike launcher variables.
  MPI_Comm node_comm;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_.rank, MPI_INFO_NULL, &node_comm);
  MPI_Comm_rank(node_comm, &world_.local_rank);
  MPI_Comm_size(node_comm, &world_.local_size);
  MPI_Comm_free(&node_comm);
  int node_leader = world_.local_rank == 0 ? 1 : 0;
  MPI_Allreduce(&node_leader, &world_.node_count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

JobSession::~JobSession() {
  if (!world_.uses_mpi) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void JobSession::fail_job(const std::string& message, int exit_code) const {
  const std::string rank = world_.world_size > 1 ? "rank " + std::to_string(world_.rank) + ": " : "";
  // One write: pieces from several ranks or threads would interleave.
  std::cerr << rank + "mygpt-ddp: error: " + message + "\n" << std::flush;
  abort_job(exit_code);
}

void JobSession::abort_job(int exit_code) const {
  const bool main_thread = std::this_thread::get_id() == initializing_thread_;
  if (world_.uses_mpi && world_.world_size > 1 && may_call_mpi_from(thread_level_, main_thread)) {
    // Our one line must come before Open MPI's abort block: the line travels through this rank's stderr
    // pipe to the launcher (its I/O forwarding), the block through another channel that can overtake
    // it (issue 40 saw the block first). Flushed, and a moment for the launcher to pass the line on.
    std::cerr << std::flush;
    std::cout << std::flush;
    std::this_thread::sleep_for(kLineBeforeAbort);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  // Another thread must not run the exit handlers while the main thread still works; a rank that exits
  // non-zero without MPI_Finalize makes mpirun (and srun --kill-on-bad-exit) end the others. Without MPI
  // the other ranks may be blocked in a collective with this one: exit without the handlers too, so that
  // no destructor waits on them (the sockets close, and the peers' collectives fail at once).
  if (!main_thread || (!world_.uses_mpi && world_.world_size > 1)) {
    std::cerr << std::flush;
    std::cout << std::flush;
    std::_Exit(exit_code);
  }
  std::exit(exit_code);
}

std::string world_layout_text(const WorldInfo& w) {
  const std::string ranks = std::to_string(w.world_size) + " rank(s) on " + std::to_string(w.node_count) + " node(s), ";
  if (w.world_size == w.node_count * w.local_size) return ranks + std::to_string(w.local_size) + " per node";
  return ranks + "unequally (" + std::to_string(w.local_size) + " on rank " + std::to_string(w.rank) + "'s node)";
}

}  // namespace mygpt
