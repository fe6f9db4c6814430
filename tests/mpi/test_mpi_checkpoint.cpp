// Checkpoints that stream, under `mpirun -np 2` and `-np 3`: while a --zero 1, 2 or 3 run saves (AdamW's
// moments sharded over the ranks, and at --zero 3 the weights too), rank 0's resident set rises by no more
// than a few of the model's largest tensors, never by the whole state that the save used to assemble on
// it; no other rank's rises by more either. Measured as the rise of VmHWM over VmRSS across one save, the high-water mark reset just
// before it (/proc/self/clear_refs), so the training step's own peak does not hide it.
//
// Every rank runs every test in the same order, so the collectives inside them pair up; tests use
// EXPECT_* only, and all ranks agree on the outcome (main).
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "distributed/job_session.h"
#include "distributed/mpi_communicator.h"
#include "tests/mpi/rank_failure_printer.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"

namespace mygpt {
namespace {

Communicator* g_comm = nullptr;

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 where there is none.
double status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) * 1024.0;
  }
  return -1;
}

// Resets VmHWM to the current VmRSS (Linux 4.0 and later); false where the system does not allow it.
bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

double max_over_ranks(double x) {
  auto t = torch::tensor({x}, torch::kDouble);
  g_comm->all_reduce(t, ReduceOp::Max);
  return t.item<double>();
}

// One run of `zero`: two steps, a first save (it pages in the code it runs), then a second one measured.
void expect_save_holds_a_few_tensors(const std::string& zero) {
  constexpr double kMiB = 1024.0 * 1024.0;
  // 8 x 512 wide, block 32, batch 1: 25M parameters, whose AdamW moments (200 MB) dwarf everything a step
  // allocates; the largest tensor is an MLP matrix of 512 x 2048 (4 MiB).
  ScratchDir dir;
  const std::vector<std::string> args = {
      "--preset", "tiny", "--n-layer", "8", "--n-embd", "512", "--n-head", "8", "--block-size", "32",
      "--batch-size", "1", "--seq-len", "32", "--steps", "3", "--warmup-steps", "1", "--eval-every", "0",
      "--dropout", "0", "--zero", zero, "--device", "cpu", "--out", (dir.path() / "run").string()};
  auto trainer = testing::trainer_of(testing::train_flags(args), testing::token_data(testing::random_tokens(4000, 64), 64),
                                     *g_comm, torch::kCPU);
  for (int64_t step = 0; step < 2; ++step) trainer->train_step(step);
  int64_t largest = 0, parameters = 0;
  for (const auto& p : trainer->model()->parameters()) {
    largest = std::max(largest, p.numel() * 4);
    parameters += p.numel();
  }
  trainer->save_checkpoint_at(1);
  const bool can_measure = max_over_ranks(reset_peak_rss() && status_bytes("VmHWM") > 0 ? 0.0 : 1.0) == 0.0;
  const double before = status_bytes("VmRSS");
  trainer->save_checkpoint_at(2);
  const double rise = status_bytes("VmHWM") - before;
  if (!can_measure) GTEST_SKIP() << "this system does not reset VmHWM (/proc/self/clear_refs)";
  // What the save would assemble whole: the moments, and at --zero 3 the weights as well.
  const double whole_state = (zero == "3" ? 12.0 : 8.0) * static_cast<double>(parameters);
  EXPECT_GT(whole_state, 40 * static_cast<double>(largest)) << "the test needs a state of many tensors";
  // A few tensors: the one gathered, its bytes on their way to the file, MPI's buffers for it.
  EXPECT_LE(rise, 4.0 * static_cast<double>(largest) + 4 * kMiB)
      << "--zero " << zero << ", rank " << g_comm->rank() << ": saving raised the resident set by " << rise / kMiB
      << " MiB; the largest tensor is " << static_cast<double>(largest) / kMiB << " MiB, the sharded state "
      << whole_state / kMiB << " MiB";
  if (g_comm->rank() == 0) {
    std::cout << "--zero " << zero << ", rank 0: peak RSS rose by " << rise / kMiB << " MiB while saving (largest tensor "
              << static_cast<double>(largest) / kMiB << " MiB, sharded state " << whole_state / kMiB << " MiB)\n";
    // What rank 0 wrote is whole: it loads with every moment and weight of the model's shape.
    const Checkpoint saved = load_checkpoint(checkpoint_path(dir.path() / "run", 2));
    int moments = 0, weights = 0;
    for (const auto& [name, tensor] : saved.tensors) {
      moments += name.rfind("optimizer.exp_avg", 0) == 0 ? 1 : 0;
      weights += name.rfind("model.", 0) == 0 ? 1 : 0;
    }
    EXPECT_EQ(moments, 2 * static_cast<int>(trainer->model()->parameters().size()));
    EXPECT_GE(weights, static_cast<int>(trainer->model()->parameters().size()));
    for (const auto& item : trainer->model()->named_parameters()) {
      const auto it = saved.tensors.find("model." + item.key());
      ASSERT_NE(it, saved.tensors.end()) << item.key();
      EXPECT_EQ(it->second.sizes(), item.value().sizes()) << item.key();
    }
  }
}

TEST(StreamedCheckpoint, ZeroOneRankZeroHoldsAFewTensorsNotTheWholeState) { expect_save_holds_a_few_tensors("1"); }
TEST(StreamedCheckpoint, ZeroTwoRankZeroHoldsAFewTensorsNotTheWholeState) { expect_save_holds_a_few_tensors("2"); }
TEST(StreamedCheckpoint, ZeroThreeRankZeroHoldsAFewTensorsNotTheWholeState) { expect_save_holds_a_few_tensors("3"); }

// --zero 3 never builds the model whole: each rank draws its piece of each parameter, one parameter at a
// time (trainer/fully_sharded_model.h). Building the run raises a rank's resident set by its shards of the
// weights and gradients (and whatever of AdamW's sharded moments exist by then), plus one whole parameter
// being drawn: well under the whole fp32 model that each rank used to build first.
TEST(ShardedStart, ZeroThreeRankNeverHoldsTheWholeModel) {
  constexpr double kMiB = 1024.0 * 1024.0;
  ScratchDir dir;
  // 16 x 512 wide: 50M parameters (200 MB in fp32) in tensors of at most 4 MiB.
  const std::vector<std::string> args = {
      "--preset", "tiny", "--n-layer", "16", "--n-embd", "512", "--n-head", "8", "--block-size", "32",
      "--batch-size", "1", "--seq-len", "32", "--steps", "1", "--warmup-steps", "1", "--eval-every", "0",
      "--zero", "3", "--device", "cpu", "--out", (dir.path() / "run").string()};
  const TrainingData data = testing::token_data(testing::random_tokens(4000, 64), 64);
  const auto flags = testing::train_flags(args);
  const bool can_measure = max_over_ranks(reset_peak_rss() && status_bytes("VmHWM") > 0 ? 0.0 : 1.0) == 0.0;
  const double before = status_bytes("VmRSS");
  auto trainer = testing::trainer_of(flags, data, *g_comm, torch::kCPU);
  const double rise = status_bytes("VmHWM") - before;
  if (!can_measure) GTEST_SKIP() << "this system does not reset VmHWM (/proc/self/clear_refs)";
  int64_t largest = 0, parameters = 0;
  for (const auto& p : trainer->model()->parameters()) {
    largest = std::max(largest, p.numel() * 4);
    parameters += p.numel();
  }
  const double whole_model = 4.0 * static_cast<double>(parameters);
  const double shards = (4.0 + 4.0 + 8.0) * static_cast<double>(parameters) / g_comm->world_size();
  EXPECT_LE(rise, shards + 2.0 * static_cast<double>(largest) + 8 * kMiB)
      << "rank " << g_comm->rank() << ": building the run raised the resident set by " << rise / kMiB
      << " MiB; the whole model is " << whole_model / kMiB << " MiB";
  if (g_comm->rank() == 0) {
    std::cout << "--zero 3 on " << g_comm->world_size() << " ranks, rank 0: building the run raised the peak RSS by "
              << rise / kMiB << " MiB (whole fp32 model " << whole_model / kMiB << " MiB, largest tensor "
              << static_cast<double>(largest) / kMiB << " MiB)\n";
  }
}


}  // namespace
}  // namespace mygpt

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mygpt::JobSession job;
  if (!job.world().uses_mpi) {
    std::cerr << "mygpt_mpi_checkpoint_tests: start me under mpirun (mpirun -np 2 " << argv[0] << ")" << std::endl;
    return 1;
  }
  torch::set_num_threads(1);
  const int rank = job.world().rank;
  mygpt::print_only_failures_off_rank_zero(rank);
  int any_failed = 0;
  {
    // Destroyed (thread joined, communicator freed) before JobSession finalizes MPI.
    mygpt::MpiCommunicator mpi(MPI_COMM_WORLD, job.thread_serialized());
    mygpt::g_comm = &mpi;
    const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    auto outcome = torch::tensor({failed}, torch::kLong);
    mpi.all_reduce(outcome, mygpt::ReduceOp::Max);
    any_failed = static_cast<int>(outcome.item<int64_t>());
    mygpt::g_comm = nullptr;
  }
  return any_failed;
}
