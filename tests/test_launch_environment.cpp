// Which launcher started the process, from tables of the variables each launcher sets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>

#include "distributed/job_session.h"
#include "distributed/launch_environment.h"

namespace mygpt::launch_environment_test {
namespace {

using Vars = std::map<std::string, std::string>;

LaunchEnvironment detect(const Vars& vars) {
  return detect_launch([&vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

// The message of the std::invalid_argument that detect throws (empty when it does not throw).
std::string refusal(const Vars& vars) {
  try {
    detect(vars);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// What torchrun 2.11's agent gives worker 1 of 2 on one node (local_elastic_agent.py).
Vars torchrun_worker() {
  return {{"RANK", "1"},           {"WORLD_SIZE", "4"},          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_WORLD_SIZE", "2"},  {"MASTER_ADDR", "node7"},
          {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "j1"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
          {"TORCHELASTIC_RESTART_COUNT", "2"}};
}

// Issue 40: torchrun with 2 ranks on one node and 1 on another printed "3 rank(s) on 2 node(s), 1 per node".
TEST(LaunchEnvironment, TheWorldLineSaysWhenNodesHoldUnequalRankCounts) {
  WorldInfo even;
  even.world_size = 4;
  even.node_count = 2;
  even.local_size = 2;
  EXPECT_EQ(world_layout_text(even), "4 rank(s) on 2 node(s), 2 per node");
  WorldInfo uneven;
  uneven.world_size = 3;
  uneven.node_count = 2;
  uneven.local_size = 1;
  EXPECT_EQ(world_layout_text(uneven), "3 rank(s) on 2 node(s), unequally (1 on rank 0's node)");
}

TEST(LaunchEnvironment, APlainProcessIsAWorldOfOne) {
  const LaunchEnvironment e = detect({});
  EXPECT_EQ(e.launcher, Launcher::none);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_FALSE(e.uses_store());
}

TEST(LaunchEnvironment, MpiLaunchersAreRecognizedByTheirVariables) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    EXPECT_EQ(detect({{var, "0"}, {"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}}).launcher, Launcher::mpi) << var;
  }
}

TEST(LaunchEnvironment, TorchrunGivesRanksTheAgentStoreAndTheRestartCount) {
  const LaunchEnvironment e = detect(torchrun_worker());
  EXPECT_EQ(e.launcher, Launcher::torchrun);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.node_count, 2);
  EXPECT_EQ(e.master_addr, "node7");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.restart_count, 2);
  EXPECT_EQ(e.description(), "torchrun, restart 2");
  Vars own_store = torchrun_worker();
  own_store["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(detect(own_store).agent_store);
}

TEST(LaunchEnvironment, PlainVariablesDefaultToOneNode) {
  const LaunchEnvironment e = detect({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(e.launcher, Launcher::environment);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.local_world_size, 3);
  EXPECT_EQ(e.node_count, 1);
  EXPECT_TRUE(e.uses_store());
  // torchrun variables win over Slurm's (srun torchrun ...).
  Vars both = torchrun_worker();
  both["SLURM_PROCID"] = "0";
  both["SLURM_STEP_NUM_TASKS"] = "2";
  EXPECT_EQ(detect(both).launcher, Launcher::torchrun);
}

TEST(LaunchEnvironment, BadOrIncompleteVariablesAreRefusedByName) {
  EXPECT_NE(refusal({{"RANK", "0"}}).find("RANK is set but WORLD_SIZE is not"), std::string::npos);
  EXPECT_NE(refusal({{"WORLD_SIZE", "2"}}).find("WORLD_SIZE is set but RANK is not"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x' is not a whole number"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 is not below WORLD_SIZE=2"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}).find("LOCAL_WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}}).find("both set"),
            std::string::npos);
  Vars torchrun = torchrun_worker();
  torchrun.erase("LOCAL_RANK");
  EXPECT_NE(refusal(torchrun).find("LOCAL_RANK"), std::string::npos);
}

TEST(LaunchEnvironment, SrunWithoutMpiFindsRankZerosHostAndAPortFromTheJob) {
  Vars srun = {{"SLURM_PROCID", "5"},          {"SLURM_STEP_NUM_TASKS", "8"},
               {"SLURM_LOCALID", "1"},         {"SLURM_NODEID", "2"},
               {"SLURM_STEP_TASKS_PER_NODE", "2(x4)"}, {"SLURM_STEP_NUM_NODES", "4"},
               {"SLURM_JOB_NODELIST", "gpu[01-04,07]"}, {"SLURM_JOB_ID", "4242"},
               {"SLURM_STEP_ID", "0"}};
  LaunchEnvironment e = detect(srun);
  EXPECT_EQ(e.launcher, Launcher::slurm);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.node_count, 4);
  EXPECT_EQ(e.master_addr, "gpu01");
  EXPECT_EQ(e.master_port, slurm_port(4242, 0));
  EXPECT_EQ(e.job_id, "4242.0");
  srun["MASTER_PORT"] = "31000";
  srun["SLURM_STEP_NODELIST"] = "gpu[03-04]";
  e = detect(srun);
  EXPECT_EQ(e.master_port, 31000);
  EXPECT_EQ(e.master_addr, "gpu03");
  // A step of one task is a plain process; the batch script (no SLURM_STEP_NUM_TASKS) too.
  EXPECT_EQ(detect({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_LOCALID", "0"},
                    {"SLURM_STEP_TASKS_PER_NODE", "1"}, {"SLURM_JOB_NODELIST", "n1"}, {"SLURM_JOB_ID", "1"}})
                .launcher,
            Launcher::none);
  EXPECT_EQ(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}).launcher, Launcher::none);
}

// What srun (Slurm 22.05's env_array_for_step and setup_env) gives a task of a step, for an allocation
// made with --ntasks-per-node=ALLOC_PER_NODE on one node: the allocation's SLURM_NTASKS_PER_NODE is passed
// on unchanged, the step's layout is in SLURM_STEP_*, and SLURM_TASKS_PER_NODE/SLURM_NTASKS are the step's
// too (the allocation's under srun --preserve-env).
Vars srun_task(int procid, int step_tasks, int alloc_per_node, bool preserve_env = false) {
  Vars v = {{"SLURM_JOB_ID", "36"},
            {"SLURM_JOBID", "36"},
            {"SLURM_STEP_ID", "0"},
            {"SLURM_STEPID", "0"},
            {"SLURM_CLUSTER_NAME", "cluster"},
            {"SLURM_JOB_NODELIST", "node1"},
            {"SLURM_NODELIST", "node1"},
            {"SLURM_STEP_NODELIST", "node1"},
            {"SLURM_JOB_NUM_NODES", "1"},
            {"SLURM_NNODES", "1"},
            {"SLURM_STEP_NUM_NODES", "1"},
            {"SLURM_NTASKS_PER_NODE", std::to_string(alloc_per_node)},
            {"SLURM_STEP_NUM_TASKS", std::to_string(step_tasks)},
            {"SLURM_STEP_TASKS_PER_NODE", std::to_string(step_tasks)},
            {"SLURM_NTASKS", std::to_string(preserve_env ? alloc_per_node : step_tasks)},
            {"SLURM_TASKS_PER_NODE", std::to_string(preserve_env ? alloc_per_node : step_tasks)},
            {"SLURM_PROCID", std::to_string(procid)},
            {"SLURM_LOCALID", std::to_string(procid)},
            {"SLURM_NODEID", "0"},
            {"SLURM_CPUS_ON_NODE", "4"},
            {"SLURM_STEP_LAUNCHER_PORT", "39251"}};
  return v;
}

// Issue 59: the allocation's SLURM_NTASKS_PER_NODE was read instead of the step's layout.
TEST(LaunchEnvironment, SrunReadsTheStepsLayoutNotTheAllocations) {
  // salloc -N1 --ntasks-per-node=2, then srun -n 1 (a one-rank eval inside an 8-per-node sbatch): a plain
  // process, not "more ranks on this node (2) than in the job".
  EXPECT_EQ(refusal(srun_task(0, 1, 2)), "");
  EXPECT_EQ(detect(srun_task(0, 1, 2)).launcher, Launcher::none);
  EXPECT_EQ(detect(srun_task(0, 1, 8, /*preserve_env=*/true)).launcher, Launcher::none);
  // salloc --ntasks-per-node=1, then srun -n 2 --overcommit: both tasks on the node, rank 1 included.
  for (int procid : {0, 1}) {
    const LaunchEnvironment e = detect(srun_task(procid, 2, 1));
    EXPECT_EQ(e.launcher, Launcher::slurm);
    EXPECT_EQ(e.rank, procid);
    EXPECT_EQ(e.world_size, 2);
    EXPECT_EQ(e.local_rank, procid);
    EXPECT_EQ(e.local_world_size, 2);
    EXPECT_EQ(e.node_count, 1);
  }
  // srun -n 3 in an allocation of 8 per node, with --preserve-env (SLURM_TASKS_PER_NODE the allocation's).
  const LaunchEnvironment e = detect(srun_task(2, 3, 8, /*preserve_env=*/true));
  EXPECT_EQ(e.local_world_size, 3);
  EXPECT_EQ(e.world_size, 3);
  // Two nodes of unequal steps: the entry of this task's SLURM_NODEID.
  Vars two = srun_task(2, 3, 8);
  two["SLURM_STEP_TASKS_PER_NODE"] = "2,1";
  two["SLURM_STEP_NUM_NODES"] = "2";
  two["SLURM_NODEID"] = "1";
  two["SLURM_LOCALID"] = "0";
  const LaunchEnvironment second = detect(two);
  EXPECT_EQ(second.local_world_size, 1);
  EXPECT_EQ(second.node_count, 2);
}

TEST(LaunchEnvironment, WithoutTheStepsLayoutTheAllocationsIsCappedByTheStep) {
  Vars v = srun_task(1, 2, 8);
  v.erase("SLURM_STEP_TASKS_PER_NODE");
  v["SLURM_TASKS_PER_NODE"] = "8";
  EXPECT_EQ(detect(v).local_world_size, 2);
  v.erase("SLURM_TASKS_PER_NODE");
  EXPECT_EQ(detect(v).local_world_size, 2);  // SLURM_NTASKS_PER_NODE=8, capped at the step's 2
  v.erase("SLURM_NTASKS_PER_NODE");
  EXPECT_NE(refusal(v).find("SLURM_STEP_TASKS_PER_NODE is not"), std::string::npos) << refusal(v);
}

// A layout that does not add up is refused by every rank alike (the same variables, the same line, no
// rank left waiting); this rank's own variables refuse it alone, with what the others need to be told.
TEST(LaunchEnvironment, ABadStepLayoutRefusesEveryRankAndABadTaskOnlyItself) {
  std::set<std::string> lines;
  for (int procid : {0, 1, 2}) {
    Vars v = srun_task(procid, 3, 8);
    v["SLURM_STEP_TASKS_PER_NODE"] = "2";
    try {
      detect(v);
      ADD_FAILURE() << "accepted";
    } catch (const RankRefused& e) {
      ADD_FAILURE() << "refused as one rank's fault: " << e.what();
    } catch (const std::invalid_argument& e) {
      lines.insert(e.what());
    }
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(*lines.begin(), "SLURM_STEP_TASKS_PER_NODE='2' places 2 task(s), but SLURM_STEP_NUM_TASKS=3");
  Vars nodes = srun_task(0, 2, 8);
  nodes["SLURM_STEP_NUM_NODES"] = "2";
  EXPECT_NE(refusal(nodes).find("lists 1 node(s), but SLURM_STEP_NUM_NODES=2"), std::string::npos) << refusal(nodes);
  Vars syntax = srun_task(0, 2, 8);
  syntax["SLURM_STEP_TASKS_PER_NODE"] = "2(x";
  EXPECT_NE(refusal(syntax).find("is not Slurm's tasks-per-node list"), std::string::npos) << refusal(syntax);

  const auto refused = [](const Vars& v) -> std::optional<RankRefused> {
    try {
      detect(v);
    } catch (const RankRefused& e) {
      return e;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  };
  Vars local = srun_task(1, 2, 8);
  local["SLURM_LOCALID"] = "2";
  auto r = refused(local);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(std::string(r->what()).find("SLURM_PROCID=1: the local rank 2 is not below the ranks on this node (2)"),
            std::string::npos)
      << r->what();
  EXPECT_EQ(r->job().rank, 1);
  EXPECT_EQ(r->job().world_size, 2);
  EXPECT_EQ(r->job().master_addr, "node1");
  EXPECT_EQ(r->job().master_port, slurm_port(36, 0));
  EXPECT_EQ(r->job().job_id, "36.0");
  Vars beyond = srun_task(3, 2, 8);
  r = refused(beyond);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(std::string(r->what()), "SLURM_PROCID=3 is not below SLURM_STEP_NUM_TASKS=2");
  Vars node = srun_task(1, 2, 8);
  node["SLURM_NODEID"] = "1";
  r = refused(node);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(std::string(r->what()).find("SLURM_NODEID=1 is not a node of SLURM_STEP_TASKS_PER_NODE='2'"), std::string::npos)
      << r->what();
  Vars garbled = srun_task(1, 2, 8);
  garbled["SLURM_PROCID"] = "one";
  r = refused(garbled);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->job().rank, -1);  // not known: it reaches the store as a client
  // Plain variables: a RANK beyond WORLD_SIZE is that process's own fault.
  r = refused({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->job().master_port, 1234);
  EXPECT_FALSE(refused({{"WORLD_SIZE", "2"}}).has_value());  // RANK missing: missing everywhere
}

// A requeued job's start finds its predecessor's claim on --out by the job's id and restart count,
// under any launcher.
TEST(LaunchEnvironment, TheBatchJobAndItsRestartsAreKnownUnderEveryLauncher) {
  Vars v = srun_task(0, 2, 8);
  v["SLURM_RESTART_COUNT"] = "3";
  LaunchEnvironment e = detect(v);
  EXPECT_EQ(e.batch_job, "slurm job 36 on cluster cluster");
  EXPECT_EQ(e.batch_restart, 3);
  e = detect(srun_task(0, 1, 8));  // a one-task step: a plain process, still in the job
  EXPECT_EQ(e.launcher, Launcher::none);
  EXPECT_EQ(e.batch_job, "slurm job 36 on cluster cluster");
  e = detect({{"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_JOB_ID", "7"}});  // mpirun inside sbatch
  EXPECT_EQ(e.launcher, Launcher::mpi);
  EXPECT_EQ(e.batch_job, "slurm job 7");
  EXPECT_EQ(e.batch_restart, 0);
  EXPECT_EQ(detect({}).batch_job, "");
}

// Issue 59: 20000 + (job*7 + step) % 10000 gave job J's step 7 the port of job J+1's step 0 (jobs 36 and
// 37 met on port 20259). No two (job, step) pairs of a window of neighbours may share a port.
TEST(LaunchEnvironment, SlurmPortsOfNeighbouringJobsAndStepsDiffer) {
  for (long long first_job : {1LL, 36LL, 9900LL, 123456789LL, 4294967200LL}) {
    std::map<int, std::pair<long long, long long>> taken;
    for (long long job = first_job; job < first_job + kSlurmPortJobSpread; ++job) {
      for (long long step = 0; step < kSlurmPortStepSpread; ++step) {
        const int port = slurm_port(job, step);
        ASSERT_GE(port, 20000);
        ASSERT_LT(port, 30000);
        const auto [it, fresh] = taken.emplace(port, std::pair{job, step});
        ASSERT_TRUE(fresh) << "jobs " << it->second.first << " step " << it->second.second << " and " << job << " step "
                           << step << " share port " << port;
      }
    }
  }
  // Consecutive jobs (an sbatch script looping over srun next to the next job's first step), far into
  // their steps.
  for (long long first_job : {36LL, 4294967200LL}) {
    std::set<int> ports;
    for (long long job : {first_job, first_job + 1}) {
      for (long long step = 0; step < 1000; ++step) ports.insert(slurm_port(job, step));
    }
    EXPECT_EQ(ports.size(), 2000u) << "jobs " << first_job << " and " << first_job + 1;
  }
  EXPECT_NE(slurm_port(36, 7), slurm_port(37, 0));
  // Neighbours land far apart, not on adjacent ports (which other services near a port may hold).
  for (long long job : {36LL, 4242LL}) {
    EXPECT_GE(std::abs(slurm_port(job + 1, 0) - slurm_port(job, 0)), 1000);
    EXPECT_GE(std::abs(slurm_port(job, 1) - slurm_port(job, 0)), 100);
  }
}

TEST(LaunchEnvironment, SlurmHostlistsAndTasksPerNode) {
  EXPECT_EQ(first_slurm_host("gpu[01-04,07]"), "gpu01");
  EXPECT_EQ(first_slurm_host("gpu[07,01-04]"), "gpu07");
  EXPECT_EQ(first_slurm_host("cpu3,gpu[1-2]"), "cpu3");
  EXPECT_EQ(first_slurm_host("rack[2-3]-node[10-12]"), "rack2-node10");
  EXPECT_EQ(first_slurm_host("node"), "node");
  EXPECT_EQ(first_slurm_host("bad[1-2"), "");
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), 0);
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("x", 0), 0);
  EXPECT_EQ(slurm_tasks_on_node("2(x3)y", 0), 0);
  EXPECT_EQ(slurm_tasks_on_node("2,", 0), 0);
  ASSERT_TRUE(slurm_task_counts("2(x3),1").has_value());
  EXPECT_EQ(slurm_task_counts("2(x3),1")->nodes, 4);
  EXPECT_EQ(slurm_task_counts("2(x3),1")->tasks, 7);
  EXPECT_FALSE(slurm_task_counts("").has_value());
  EXPECT_FALSE(slurm_task_counts("0").has_value());
  for (long long job : {0LL, 1LL, 123456789LL}) {
    EXPECT_GE(slurm_port(job, 3), 20000);
    EXPECT_LT(slurm_port(job, 3), 30000);
  }
  EXPECT_NE(slurm_port(100, 0), slurm_port(101, 0));
}

}  // namespace
}  // namespace mygpt::launch_environment_test
