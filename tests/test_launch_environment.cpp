// Which launcher started the process, from tables of the variables each launcher sets.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "distributed/job_session.h"
#include "distributed/launch_environment.h"

namespace mygpt {
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
  for (long long job : {0LL, 1LL, 123456789LL}) {
    EXPECT_GE(slurm_port(job, 3), 20000);
    EXPECT_LT(slurm_port(job, 3), 30000);
  }
  EXPECT_NE(slurm_port(100, 0), slurm_port(101, 0));
}

}  // namespace
}  // namespace mygpt
