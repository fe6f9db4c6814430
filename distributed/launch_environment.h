#pragma once
// Which launcher started this process, and the process's place in the job, read from the launcher's
// environment variables alone (nothing is opened here, so the rules are tested with a table of
// variables). Precedence, most specific first:
//   MPI (mpirun, srun --mpi=pmix|pmi2)    ranks from MPI itself (filled in by JobSession)
//   torchrun                               RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT,
//                                          TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE, ..._RESTART_COUNT
//   plain variables (any other scheduler)  RANK, WORLD_SIZE [, LOCAL_RANK, LOCAL_WORLD_SIZE], MASTER_ADDR/PORT
//   srun without MPI                       SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, the node's tasks,
//                                          rank 0's host from the step's node list, a port from job and step
// Without MPI, the ranks meet through a c10d store (store_rendezvous.h).
//
// Under srun the step's variables are read, never the allocation's: srun passes on the allocation's
// SLURM_NTASKS_PER_NODE (from salloc/sbatch --ntasks-per-node) to a step that may be smaller or larger, so
// the node's task count is SLURM_STEP_TASKS_PER_NODE's entry for SLURM_NODEID; the allocation's
// SLURM_TASKS_PER_NODE, then SLURM_NTASKS_PER_NODE, only where a step variable is missing. The layout is
// checked on every rank from the variables srun gives them all alike, so a bad one refuses every rank
// with the same line at once; what concerns one rank alone (its SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID)
// throws RankRefused, which carries where the job meets so that the refused rank can leave its line for
// the others there (store_rendezvous.h: tell_peers_of_refusal) instead of leaving them waiting for it.
#include <functional>
#include <optional>
#include <stdexcept>
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
  bool derived_port = false;  // master_port was derived from the Slurm job and step (no MASTER_PORT)
  // The batch job this process belongs to, under any launcher (srun's tasks, mpirun inside sbatch, a
  // one-task step): "slurm job 1234 on cluster c" while SLURM_JOB_ID is set, else empty; and how often
  // Slurm has requeued it (SLURM_RESTART_COUNT). Slurm never runs two starts of one job at once, so a
  // claim left by an earlier start of this job is a dead one (common/folder_claim.h).
  std::string batch_job;
  long long batch_restart = 0;

  // Ranks meet through a c10d store (not MPI), and use the store's backends even as a world of one.
  bool uses_store() const { return launcher == Launcher::torchrun || launcher == Launcher::environment || launcher == Launcher::slurm; }
  // e.g. "torchrun, restart 1" for the world line.
  std::string description() const;
};

// A refusal of variables that concern this rank alone (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, RANK,
// LOCAL_RANK) while the job's shared ones were good: job() is the job as far as it was read (world size,
// rank 0's host and port, this rank's number or -1 where that itself was bad).
class RankRefused : public std::invalid_argument {
 public:
  RankRefused(const std::string& why, const LaunchEnvironment& job) : std::invalid_argument(why), job_(job) {}
  const LaunchEnvironment& job() const { return job_; }

 private:
  LaunchEnvironment job_;
};

// A variable's value, or nothing when unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;

// Reads the launcher's variables. Throws std::invalid_argument (one line naming the variable) for half a
// set (RANK without WORLD_SIZE), values that are not numbers or contradict each other (a step's task list
// that does not add up to its task count), or the variables of two launchers at once (MPI's and
// torchrun's); RankRefused where only this rank's own variables are wrong (RANK >= WORLD_SIZE).
LaunchEnvironment detect_launch(const EnvironmentLookup& env);
LaunchEnvironment detect_launch();  // the process's own environment

// Slurm's hostlist syntax ("gpu[01-04,07],cpu3"): the first host ("gpu01").
std::string first_slurm_host(const std::string& nodelist);
// Slurm's tasks-per-node syntax ("2(x3),1"): the tasks on node `node_id` (0-based); 0 when out of range
// or not that syntax.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id);
// The nodes and the tasks a tasks-per-node list names ("2(x3),1": 4 nodes, 7 tasks); nothing when it is
// not that syntax.
struct SlurmTaskCounts {
  long long nodes = 0;
  long long tasks = 0;
};
std::optional<SlurmTaskCounts> slurm_task_counts(const std::string& tasks_per_node);
// The TCP store's port for a Slurm step without MASTER_PORT: the same on every node, in 20000-29972
// (below Linux's ephemeral ports). A multiplicative hash modulo the prime 9973, chosen so that no two
// (job, step) pairs less than kSlurmPortJobSpread jobs and kSlurmPortStepSpread steps apart share a port
// (neighbouring jobs on a shared node, job arrays, an sbatch script's successive or parallel srun steps),
// consecutive jobs never meet below step 4000, and consecutive jobs land thousands of ports apart. Pairs
// further apart may meet: rank 0 then finds the port taken and says so.
int slurm_port(long long job_id, long long step_id);
constexpr int kSlurmPortJobSpread = 200;
constexpr int kSlurmPortStepSpread = 48;

}  // namespace mygpt
