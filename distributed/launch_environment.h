#pragma once
// Which launcher started this process, and the process's place in the job, read from the launcher's
// environment variables alone (nothing is opened here, so the rules are tested with a table of
// variables). Precedence, most specific first:
//   MPI (mpirun, srun --mpi=pmix|pmi2)    ranks from MPI itself (filled in by JobSession)
//   torchrun                               RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT,
//                                          TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE, ..._RESTART_COUNT
//   plain variables (any other scheduler)  RANK, WORLD_SIZE [, LOCAL_RANK, LOCAL_WORLD_SIZE], MASTER_ADDR/PORT
//   srun without MPI                       SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, the node's tasks,
//                                          rank 0's host from the step's node list, a port from the job id
// Without MPI, the ranks meet through a c10d store (store_rendezvous.h).
#include <functional>
#include <optional>
#include <string>

namespace mygpt {

enum class Launcher { none, mpi, torchrun, environment, slurm };
const char* launcher_name(Launcher launcher);  // "mpi", "torchrun", "env", "slurm"; none: "none"

struct LaunchEnvironment {
  Launcher launcher = Launcher::none;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this node
  int local_world_size = 1;
  int node_count = 1;
  // Where rank 0's TCP store is (store launchers): host and port, and the variables they came from.
  std::string master_addr;
  int master_port = 0;
  std::string master_source;  // e.g. "MASTER_ADDR/MASTER_PORT" or "SLURM_STEP_NODELIST and SLURM_JOB_ID"
  bool agent_store = false;   // torchrun's agent serves the store: every rank, rank 0 too, is a client
  int restart_count = 0;      // torchrun's restarts of the worker group so far
  std::string job_id;         // TORCHELASTIC_RUN_ID or SLURM_JOB_ID[.STEP]; empty for plain variables

  // Ranks meet through a c10d store (not MPI), and use the store's backends even as a world of one.
  bool uses_store() const { return launcher == Launcher::torchrun || launcher == Launcher::environment || launcher == Launcher::slurm; }
  // e.g. "torchrun, restart 1" for the world line.
  std::string description() const;
};

// A variable's value, or nothing when unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;

// Reads the launcher's variables. Throws std::invalid_argument (one line naming the variable) for half a
// set (RANK without WORLD_SIZE), values that are not numbers or contradict each other (RANK >= WORLD_SIZE),
// or the variables of two launchers at once (MPI's and torchrun's).
LaunchEnvironment detect_launch(const EnvironmentLookup& env);
LaunchEnvironment detect_launch();  // the process's own environment

// Slurm's hostlist syntax ("gpu[01-04,07],cpu3"): the first host ("gpu01").
std::string first_slurm_host(const std::string& nodelist);
// Slurm's tasks-per-node syntax ("2(x3),1"): the tasks on node `node_id` (0-based); 0 when out of range.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id);
// The TCP store's port for a Slurm job without MASTER_PORT: the same on every node, different for
// jobs (and steps) that run at the same time, in 20000-29999 (below Linux's ephemeral ports).
int slurm_port(long long job_id, long long step_id);

}  // namespace mygpt
