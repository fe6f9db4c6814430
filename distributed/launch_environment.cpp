#include "distributed/launch_environment.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

namespace mygpt {
namespace {

// A variable that must hold a whole number in [lo, hi].
long long whole_number(const std::string& name, const std::string& value, long long lo, long long hi) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(value, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size()) {
    throw std::invalid_argument(name + "='" + value + "' is not a whole number");
  }
  if (n < lo || n > hi) {
    throw std::invalid_argument(name + "=" + value + " is out of range (" + std::to_string(lo) + " to " +
                                std::to_string(hi) + ")");
  }
  return n;
}

class Variables {
 public:
  explicit Variables(const EnvironmentLookup& env) : env_(env) {}
  bool has(const std::string& name) const { return env_(name).has_value(); }
  std::optional<std::string> text(const std::string& name) const { return env_(name); }
  // `name` must be set when `because` is: "RANK is set but WORLD_SIZE is not".
  std::string required(const std::string& name, const std::string& because) const {
    auto v = env_(name);
    if (!v) throw std::invalid_argument(because + " is set but " + name + " is not (" + hint_ + ")");
    return *v;
  }
  int number(const std::string& name, long long lo, long long hi, const std::string& because) const {
    return static_cast<int>(whole_number(name, required(name, because), lo, hi));
  }
  std::optional<int> optional_number(const std::string& name, long long lo, long long hi) const {
    auto v = env_(name);
    if (!v) return std::nullopt;
    return static_cast<int>(whole_number(name, *v, lo, hi));
  }
  void set_hint(std::string hint) { hint_ = std::move(hint); }

 private:
  const EnvironmentLookup& env_;
  std::string hint_;
};

constexpr int kMaxRanks = 1 << 20;

// MASTER_ADDR and MASTER_PORT, as torchrun and PyTorch's env:// read them. Either may be missing here:
// a file rendezvous needs neither, and the store says which one it lacks.
void read_master(const Variables& v, LaunchEnvironment& e) {
  if (auto addr = v.text("MASTER_ADDR")) {
    if (addr->empty()) throw std::invalid_argument("MASTER_ADDR is empty (rank 0's host name or address)");
    e.master_addr = *addr;
  }
  if (auto port = v.optional_number("MASTER_PORT", 1, 65535)) e.master_port = *port;
  e.master_source = "MASTER_ADDR/MASTER_PORT";
}

// This rank's place against the job's size: RankRefused, since each rank has variables of its own here.
void check_rank(const LaunchEnvironment& e, const std::string& rank_var, const std::string& world_var) {
  if (e.rank >= e.world_size) {
    throw RankRefused(rank_var + "=" + std::to_string(e.rank) + " is not below " + world_var + "=" +
                          std::to_string(e.world_size),
                      e);
  }
  if (e.local_rank >= e.local_world_size) {
    throw RankRefused(rank_var + "=" + std::to_string(e.rank) + ": the local rank " + std::to_string(e.local_rank) +
                          " is not below the ranks on this node (" + std::to_string(e.local_world_size) + ")",
                      e);
  }
  if (e.local_world_size > e.world_size) {
    throw RankRefused("more ranks on this node (" + std::to_string(e.local_world_size) + ") than in the job (" +
                          world_var + "=" + std::to_string(e.world_size) + ")",
                      e);
  }
}

// torchrun, or RANK/WORLD_SIZE set by hand (or by a scheduler's script).
LaunchEnvironment read_torch_style(Variables& v, bool torchrun) {
  LaunchEnvironment e;
  e.launcher = torchrun ? Launcher::torchrun : Launcher::environment;
  v.set_hint(torchrun ? "torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT"
                      : "a job without a launcher needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
  const std::string given = v.has("RANK") ? "RANK" : v.has("WORLD_SIZE") ? "WORLD_SIZE" : "TORCHELASTIC_RUN_ID";
  e.world_size = v.number("WORLD_SIZE", 1, kMaxRanks, given);
  v.required("RANK", given);  // missing, it is missing on every rank (a value is each rank's own, below)
  read_master(v, e);
  if (torchrun) {
    e.job_id = v.text("TORCHELASTIC_RUN_ID").value_or("");
    e.agent_store = v.text("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    e.restart_count = v.optional_number("TORCHELASTIC_RESTART_COUNT", 0, std::numeric_limits<int>::max()).value_or(0);
    if (auto nodes = v.optional_number("GROUP_WORLD_SIZE", 1, kMaxRanks)) e.node_count = *nodes;
  }
  // This process's own variables: wrong, they refuse it alone (RankRefused: see the header).
  e.rank = -1;
  try {
    e.rank = v.number("RANK", 0, kMaxRanks, given);
    // By hand on one node, LOCAL_RANK and LOCAL_WORLD_SIZE may be left out: every rank is local.
    const auto local_rank = v.optional_number("LOCAL_RANK", 0, kMaxRanks);
    const auto local_world = v.optional_number("LOCAL_WORLD_SIZE", 1, kMaxRanks);
    if (torchrun && (!local_rank || !local_world)) {
      v.required(local_rank ? "LOCAL_WORLD_SIZE" : "LOCAL_RANK", given);
    }
    if (local_rank.has_value() != local_world.has_value()) {
      v.required(local_rank ? "LOCAL_WORLD_SIZE" : "LOCAL_RANK", local_rank ? "LOCAL_RANK" : "LOCAL_WORLD_SIZE");
    }
    e.local_rank = local_rank.value_or(e.rank);
    e.local_world_size = local_world.value_or(e.world_size);
  } catch (const std::invalid_argument& bad) {
    throw RankRefused(bad.what(), e);
  }
  check_rank(e, "RANK", "WORLD_SIZE");
  if (e.node_count == 1 && e.world_size % e.local_world_size == 0) e.node_count = e.world_size / e.local_world_size;
  return e;
}

// The number of tasks on this rank's node, from the step's layout where srun gives it (every rank checks
// the same variables against each other, so a bad layout refuses them all alike), else the allocation's.
int tasks_on_this_node(const Variables& v, LaunchEnvironment& e, int node) {
  if (const auto step = v.text("SLURM_STEP_TASKS_PER_NODE")) {
    const std::string var = "SLURM_STEP_TASKS_PER_NODE='" + *step + "'";
    const auto counts = slurm_task_counts(*step);
    if (!counts) throw std::invalid_argument(var + " is not Slurm's tasks-per-node list (like 2(x3),1)");
    if (counts->tasks != e.world_size) {
      throw std::invalid_argument(var + " places " + std::to_string(counts->tasks) + " task(s), but SLURM_STEP_NUM_TASKS=" +
                                  std::to_string(e.world_size));
    }
    if (v.has("SLURM_STEP_NUM_NODES") && counts->nodes != e.node_count) {
      throw std::invalid_argument(var + " lists " + std::to_string(counts->nodes) + " node(s), but SLURM_STEP_NUM_NODES=" +
                                  std::to_string(e.node_count));
    }
    e.node_count = static_cast<int>(counts->nodes);
    const int tasks = slurm_tasks_on_node(*step, node);
    if (tasks == 0) {
      throw RankRefused("SLURM_NODEID=" + std::to_string(node) + " is not a node of " + var + " (" +
                            std::to_string(counts->nodes) + " node(s))",
                        e);
    }
    return tasks;
  }
  // No step layout (variables set by hand, or a Slurm before 2.x): the allocation's, which can only be
  // more than the step holds; the step's size caps it.
  if (const auto allocation = v.text("SLURM_TASKS_PER_NODE")) {
    const int tasks = slurm_tasks_on_node(*allocation, node);
    if (tasks == 0) {
      throw RankRefused("SLURM_TASKS_PER_NODE='" + *allocation + "' has no entry for SLURM_NODEID=" + std::to_string(node) +
                            " (and SLURM_STEP_TASKS_PER_NODE is not set)",
                        e);
    }
    return std::min(tasks, e.world_size);
  }
  if (const auto per_node = v.optional_number("SLURM_NTASKS_PER_NODE", 1, kMaxRanks)) {
    return std::min(*per_node, e.world_size);
  }
  v.required("SLURM_STEP_TASKS_PER_NODE", "SLURM_PROCID");
  return 0;  // not reached: required() throws
}

// srun without MPI wiring: every task of the step is a rank.
LaunchEnvironment read_slurm(Variables& v) {
  LaunchEnvironment e;
  e.launcher = Launcher::slurm;
  v.set_hint("srun sets SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID and SLURM_STEP_TASKS_PER_NODE");
  // What every task of the step shares: its size, its layout, rank 0's host and port.
  e.world_size = v.number("SLURM_STEP_NUM_TASKS", 1, kMaxRanks, "SLURM_PROCID");
  e.node_count = v.optional_number("SLURM_STEP_NUM_NODES", 1, kMaxRanks)
                     .value_or(v.optional_number("SLURM_NNODES", 1, kMaxRanks).value_or(1));
  const std::string job = v.text("SLURM_JOB_ID").value_or("");
  const std::string step = v.text("SLURM_STEP_ID").value_or("0");
  e.job_id = job.empty() ? "" : job + "." + step;
  read_master(v, e);
  std::string sources;
  if (e.master_addr.empty()) {
    const std::string var = v.has("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    e.master_addr = first_slurm_host(v.required(var, "SLURM_PROCID"));
    if (e.master_addr.empty()) throw std::invalid_argument(var + " names no host");
    sources = var;
  } else {
    sources = "MASTER_ADDR";
  }
  if (e.master_port == 0) {
    const long long job_id = whole_number("SLURM_JOB_ID", v.required("SLURM_JOB_ID", "SLURM_PROCID"), 0,
                                          std::numeric_limits<long long>::max());
    const long long step_id = whole_number("SLURM_STEP_ID", step, 0, std::numeric_limits<long long>::max());
    e.master_port = slurm_port(job_id, step_id);
    e.derived_port = true;
    sources += " and a port from SLURM_JOB_ID and SLURM_STEP_ID (MASTER_PORT overrides)";
  } else {
    sources += " and MASTER_PORT";
  }
  e.master_source = sources;
  // This task's own place. In a real step these agree with the layout above; when they do not (set by
  // hand, or mixed up), this rank alone is refused, and RankRefused tells it where the others wait.
  v.required("SLURM_LOCALID", "SLURM_PROCID");  // missing, it is missing on every rank
  e.rank = -1;
  const auto own = [&](const auto& read) {
    try {
      return read();
    } catch (const RankRefused&) {
      throw;
    } catch (const std::invalid_argument& bad) {
      throw RankRefused(bad.what(), e);
    }
  };
  e.rank = own([&] { return v.number("SLURM_PROCID", 0, kMaxRanks, "SLURM_STEP_NUM_TASKS"); });
  e.local_rank = own([&] { return v.number("SLURM_LOCALID", 0, kMaxRanks, "SLURM_PROCID"); });
  const int node = own([&] { return v.optional_number("SLURM_NODEID", 0, kMaxRanks).value_or(0); });
  e.local_world_size = tasks_on_this_node(v, e, node);
  check_rank(e, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
  return e;
}

// The Slurm batch job around this process, whatever started it.
void read_batch_job(const Variables& v, LaunchEnvironment& e) {
  const auto job = v.text("SLURM_JOB_ID");
  if (!job || job->empty()) return;
  const std::string cluster = v.text("SLURM_CLUSTER_NAME").value_or("");
  e.batch_job = "slurm job " + *job + (cluster.empty() ? "" : " on cluster " + cluster);
  e.batch_restart = v.optional_number("SLURM_RESTART_COUNT", 0, std::numeric_limits<int>::max()).value_or(0);
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::mpi:
      return "mpi";
    case Launcher::torchrun:
      return "torchrun";
    case Launcher::environment:
      return "env";
    case Launcher::slurm:
      return "slurm";
    case Launcher::none:
      break;
  }
  return "none";
}

std::string LaunchEnvironment::description() const {
  std::string text = launcher_name(launcher);
  if (launcher == Launcher::torchrun && restart_count > 0) text += ", restart " + std::to_string(restart_count);
  return text;
}

LaunchEnvironment detect_launch(const EnvironmentLookup& env) {
  Variables v(env);
  // Open MPI's mpirun, PMIx (Open MPI 5, srun --mpi=pmix), PMI/PMI2 (srun --mpi=pmi2, MPICH's hydra).
  std::string mpi_var;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (v.has(var)) {
      mpi_var = var;
      break;
    }
  }
  const bool torchrun = v.has("TORCHELASTIC_RUN_ID");
  const bool torch_style = torchrun || v.has("RANK") || v.has("WORLD_SIZE");
  if (!mpi_var.empty()) {
    if (torch_style) {
      const std::string other = torchrun ? "TORCHELASTIC_RUN_ID" : v.has("RANK") ? "RANK" : "WORLD_SIZE";
      throw std::invalid_argument(other + " (torchrun or plain variables) and " + mpi_var +
                                  " (an MPI launcher) are both set: start the job with one launcher");
    }
    LaunchEnvironment e;
    e.launcher = Launcher::mpi;
    read_batch_job(v, e);
    return e;
  }
  LaunchEnvironment e;
  if (torch_style) {
    e = read_torch_style(v, torchrun);
  } else if (v.has("SLURM_PROCID") && v.has("SLURM_STEP_NUM_TASKS")) {
    // srun's tasks of a job step (the batch script itself has no SLURM_STEP_NUM_TASKS). A step of one
    // task is a plain process.
    e = read_slurm(v);
    if (e.world_size == 1) e = LaunchEnvironment{};
  }
  read_batch_job(v, e);
  return e;
}

LaunchEnvironment detect_launch() {
  return detect_launch([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

std::string first_slurm_host(const std::string& nodelist) {
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    // A range list: its first entry ("01" of "[01-04,07]"), zero padding kept.
    size_t j = i + 1;
    while (j < nodelist.size() && nodelist[j] != '-' && nodelist[j] != ',' && nodelist[j] != ']') host += nodelist[j++];
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) return "";
    i = close + 1;
  }
  return host;
}

namespace {

// "2(x3),1" as runs of (tasks, nodes): {2, 3}, {1, 1}; nothing when it is not that syntax.
std::optional<std::vector<std::pair<long long, long long>>> task_runs(const std::string& tasks_per_node) {
  std::vector<std::pair<long long, long long>> runs;
  size_t i = 0;
  while (i <= tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', i);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(i, end - i);
    long long tasks = 0, repeat = 1;
    try {
      size_t used = 0;
      tasks = std::stoll(item, &used);
      if (used < item.size()) {
        if (item.compare(used, 2, "(x") != 0 || item.back() != ')') return std::nullopt;
        const std::string count = item.substr(used + 2, item.size() - used - 3);
        size_t count_used = 0;
        repeat = std::stoll(count, &count_used);
        if (count_used != count.size()) return std::nullopt;
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (tasks <= 0 || repeat <= 0 || tasks > kMaxRanks || repeat > kMaxRanks) return std::nullopt;
    runs.emplace_back(tasks, repeat);
    i = end + 1;
  }
  return runs;
}

}  // namespace

int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id) {
  const auto runs = task_runs(tasks_per_node);
  if (!runs || node_id < 0) return 0;
  long long node = 0;
  for (const auto& [tasks, repeat] : *runs) {
    if (node_id < node + repeat) return static_cast<int>(tasks);
    node += repeat;
  }
  return 0;
}

std::optional<SlurmTaskCounts> slurm_task_counts(const std::string& tasks_per_node) {
  const auto runs = task_runs(tasks_per_node);
  if (!runs) return std::nullopt;
  SlurmTaskCounts counts;
  for (const auto& [tasks, repeat] : *runs) {
    counts.nodes += repeat;
    counts.tasks += tasks * repeat;
  }
  return counts;
}

int slurm_port(long long job_id, long long step_id) {
  // (A * job + B * step) mod P: linear, so two pairs meet only when their difference (dj, ds) solves
  // A*dj + B*ds = 0 mod P. A is near P/phi (Fibonacci hashing: job J+1 lands about 3800 ports from job J),
  // and B was searched so that the shortest such differences are (7, 48), (417, 10) and (622, 9): no
  // pairs less than 200 jobs and 48 steps apart meet, no steps of consecutive jobs below step 4000, no
  // steps a few apart of jobs less than 417 apart (tests/test_launch_environment.cpp checks each window
  // pair by pair). The old 20000 + (7 job + step) % 10000 had (1, -7): job J+1's step 0 was job J's step 7.
  constexpr long long kPrime = 9973, kJob = 6164, kStep = 8243;
  const long long job = ((job_id % kPrime) + kPrime) % kPrime;
  const long long step = ((step_id % kPrime) + kPrime) % kPrime;
  return 20000 + static_cast<int>((kJob * job + kStep * step) % kPrime);
}

}  // namespace mygpt
