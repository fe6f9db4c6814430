#include "distributed/launch_environment.h"

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

void check_rank(const LaunchEnvironment& e, const std::string& rank_var, const std::string& world_var) {
  if (e.rank >= e.world_size) {
    throw std::invalid_argument(rank_var + "=" + std::to_string(e.rank) + " is not below " + world_var + "=" +
                                std::to_string(e.world_size));
  }
  if (e.local_rank >= e.local_world_size) {
    throw std::invalid_argument("the local rank " + std::to_string(e.local_rank) + " is not below the ranks on this node (" +
                                std::to_string(e.local_world_size) + ")");
  }
  if (e.local_world_size > e.world_size) {
    throw std::invalid_argument("more ranks on this node (" + std::to_string(e.local_world_size) + ") than in the job (" +
                                world_var + "=" + std::to_string(e.world_size) + ")");
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
  read_master(v, e);
  if (torchrun) {
    e.job_id = v.text("TORCHELASTIC_RUN_ID").value_or("");
    e.agent_store = v.text("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    e.restart_count = v.optional_number("TORCHELASTIC_RESTART_COUNT", 0, std::numeric_limits<int>::max()).value_or(0);
    if (auto nodes = v.optional_number("GROUP_WORLD_SIZE", 1, kMaxRanks)) e.node_count = *nodes;
  }
  check_rank(e, "RANK", "WORLD_SIZE");
  if (e.node_count == 1 && e.world_size % e.local_world_size == 0) e.node_count = e.world_size / e.local_world_size;
  return e;
}

// srun without MPI wiring: every task of the step is a rank.
LaunchEnvironment read_slurm(Variables& v) {
  LaunchEnvironment e;
  e.launcher = Launcher::slurm;
  v.set_hint("srun sets SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID and SLURM_STEP_TASKS_PER_NODE");
  e.world_size = v.number("SLURM_STEP_NUM_TASKS", 1, kMaxRanks, "SLURM_PROCID");
  e.rank = v.number("SLURM_PROCID", 0, kMaxRanks, "SLURM_STEP_NUM_TASKS");
  e.local_rank = v.number("SLURM_LOCALID", 0, kMaxRanks, "SLURM_PROCID");
  if (auto per_node = v.optional_number("SLURM_NTASKS_PER_NODE", 1, kMaxRanks)) {
    e.local_world_size = *per_node;
  } else {
    const std::string var = v.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    const std::string text = v.required(var, "SLURM_PROCID");
    const int node = v.optional_number("SLURM_NODEID", 0, kMaxRanks).value_or(0);
    e.local_world_size = slurm_tasks_on_node(text, node);
    if (e.local_world_size == 0) {
      throw std::invalid_argument(var + "='" + text + "' has no entry for SLURM_NODEID=" + std::to_string(node));
    }
  }
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
    sources += " and a port from SLURM_JOB_ID (MASTER_PORT overrides)";
  } else {
    sources += " and MASTER_PORT";
  }
  e.master_source = sources;
  check_rank(e, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
  return e;
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
    return e;
  }
  if (torch_style) return read_torch_style(v, torchrun);
  // srun's tasks of a job step (the batch script itself has no SLURM_STEP_NUM_TASKS). A step of one
  // task is a plain process.
  if (v.has("SLURM_PROCID") && v.has("SLURM_STEP_NUM_TASKS")) {
    LaunchEnvironment e = read_slurm(v);
    if (e.world_size > 1) return e;
  }
  return {};
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

int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id) {
  // "2(x3),1": three nodes of 2 tasks, then one of 1.
  long long node = 0;
  size_t i = 0;
  while (i < tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', i);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(i, end - i);
    long long tasks = 0, repeat = 1;
    try {
      size_t used = 0;
      tasks = std::stoll(item, &used);
      if (used < item.size()) {
        if (item.compare(used, 2, "(x") != 0 || item.back() != ')') return 0;
        repeat = std::stoll(item.substr(used + 2, item.size() - used - 3));
      }
    } catch (const std::exception&) {
      return 0;
    }
    if (tasks <= 0 || repeat <= 0) return 0;
    if (node_id < node + repeat) return static_cast<int>(tasks);
    node += repeat;
    i = end + 1;
  }
  return 0;
}

int slurm_port(long long job_id, long long step_id) {
  return 20000 + static_cast<int>((job_id * 7 + step_id) % 10000);
}

}  // namespace mygpt
