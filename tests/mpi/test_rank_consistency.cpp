// Every rank holds the same parameters after every step, for every sharded path, under allocator churn
// (run under `mpirun -np 2` and `-np 3`). Asynchronous collectives whose input tensors or handles are freed
// before wait() give "torn" results that only some ranks see (nanochat #843): here each rank allocates and
// frees tensors of sizes of its own between steps and inside backward (a hook on every parameter's
// gradient), so a buffer freed too early is reused at once, differently on each rank; after every step
// every rank's parameters are compared bit for bit with rank 0's (a broadcast of rank 0's, compared as
// integers: -0 and 0, or two NaNs, are told apart). And --check-ranks-every's check
// (trainer/rank_consistency.h): silent while the ranks agree, and one failure naming the step and the rank
// when one rank's parameters are perturbed.
//
// A sharded path is one row of kShardedPaths: a new ZeRO stage is one more row.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "distributed/job_session.h"
#include "distributed/mpi_communicator.h"
#include "distributed/rank_zero_reports.h"
#include "common/strprintf.h"
#include "tests/mpi/rank_failure_printer.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"
#include "trainer/rank_consistency.h"
#include "trainer/trainer.h"

namespace mygpt {
namespace {

Communicator* g_comm = nullptr;  // set by main
Communicator& comm() { return *g_comm; }

constexpr int64_t kVocab = 29;
constexpr int64_t kSteps = 6;

// The flags that choose a sharded path, on top of the common ones below.
struct ShardedPath {
  const char* name;
  std::vector<std::string> flags;
};
const std::vector<ShardedPath> kShardedPaths = {
    {"zero0", {"--zero", "0", "--bucket-mb", "0.01"}},
    {"zero1", {"--zero", "1", "--bucket-mb", "0.01"}},
    {"zero2", {"--zero", "2", "--bucket-mb", "0.01"}},
    {"zero3", {"--zero", "3"}},  // a collective per unit: no buckets to size
    {"muon", {"--optimizer", "muon", "--bucket-mb", "0.01"}},
};

// Width 35, vocabulary 29: parameters of odd sizes, none a multiple of a shard; small buckets (the paths'
// --bucket-mb) so that a step has several collectives in flight; two micro-steps; dropout; every step clips.
std::vector<std::string> run_args(const ScratchDir& dir, const std::vector<std::string>& path) {
  std::vector<std::string> args = {"--preset", "tiny", "--n-embd", "35", "--n-head", "5", "--block-size", "16",
                                   "--steps", std::to_string(kSteps), "--batch-size", "2", "--seq-len", "16",
                                   "--grad-accum", "2", "--warmup-steps", "2", "--lr", "1e-2", "--grad-clip", "0.5",
                                   "--dropout", "0.1", "--eval-every", "0",
                                   "--out", dir.path().string(), "--device", "cpu", "--seed", "4"};
  args.insert(args.end(), path.begin(), path.end());
  return args;
}

// Tensors of sizes drawn per rank, some kept for a while and some freed at once, so that the allocator's
// blocks are reused in a different order on every rank.
class AllocatorChurn {
 public:
  explicit AllocatorChurn(int rank) : random_(1234u + 7919u * static_cast<unsigned>(rank)) {}
  void stir() {
    std::uniform_int_distribution<int64_t> size(1, 1 << 16);
    for (int i = 0; i < 4; ++i) {
      torch::Tensor t = torch::full({size(random_)}, static_cast<float>(i) - 7.5f);
      if (random_() % 2 == 0) kept_[random_() % kept_.size()] = std::move(t);  // freed later, in any order
    }
  }

 private:
  std::mt19937_64 random_;
  std::vector<torch::Tensor> kept_ = std::vector<torch::Tensor>(8);
};

// The number of parameter values on this rank whose bits differ from rank 0's, the same on every rank
// (the largest over the ranks).
int64_t values_differing_from_rank_zero(Trainer& run) {
  std::vector<torch::Tensor> flat;
  // Whole parameters: under --zero 3 the model's own tensors hold nothing between uses.
  for (const auto& p : run.whole_parameters()) flat.push_back(p.reshape({-1}));
  const torch::Tensor mine = torch::cat(flat);
  torch::Tensor rank0 = mine.clone();
  comm().broadcast(rank0, 0);
  auto differing = torch::ne(mine.view(torch::kInt), rank0.view(torch::kInt)).sum().to(torch::kLong).reshape({1});
  comm().all_reduce(differing, ReduceOp::Max);
  return differing.item<int64_t>();
}

class EveryRankTheSameParameters : public ::testing::TestWithParam<ShardedPath> {};

TEST_P(EveryRankTheSameParameters, AfterEveryStepUnderAllocatorChurn) {
  ScratchDir dir;
  auto run = testing::trainer_of(testing::train_flags(run_args(dir, GetParam().flags)),
                                 testing::token_data(testing::random_tokens(4000, kVocab, 5), kVocab), comm(),
                                 torch::kCPU);
  AllocatorChurn churn(comm().rank());
  for (const auto& p : run->model()->parameters()) {
    p.register_hook([&churn](const torch::Tensor&) { churn.stir(); });  // inside backward
  }
  for (int64_t step = 0; step < kSteps; ++step) {
    churn.stir();  // between steps
    const StepResult r = run->train_step(step);
    churn.stir();
    EXPECT_FALSE(r.skipped) << "step " << step;
    EXPECT_EQ(values_differing_from_rank_zero(*run), 0) << GetParam().name << ": after step " << step;
  }
  // The run's own check agrees: every rank's checksum the same (no throw).
  RankConsistencyCheck check(comm(), /*every=*/1);
  EXPECT_NO_THROW(check.after_step(kSteps - 1, *run->model(), [&] { return run->whole_parameters(); }));
}

INSTANTIATE_TEST_SUITE_P(ShardedPaths, EveryRankTheSameParameters, ::testing::ValuesIn(kShardedPaths),
                         [](const auto& info) { return std::string(info.param.name); });

// MYGPT_TEST_PERTURB_RANK=<last rank>:2 moves one value of that rank's parameters after step 2 (under
// --zero 0: with --zero 1 the value's owner would gather its own copy back to every rank): the check
// every 2 steps passes after step 1 and fails after step 3, on rank 0 with the line naming the step and the
// rank, on the others with EndedByRankZero (which waits for rank 0: here rank 0 lets it go by a barrier,
// where in a run it would end the job).
TEST(RankConsistencyCheck, CatchesOneRanksPlantedDifference) {
  const int last = comm().world_size() - 1;
  ScratchDir dir;
  auto run = testing::trainer_of(testing::train_flags(run_args(dir, {"--zero", "0"})),
                                 testing::token_data(testing::random_tokens(4000, kVocab, 5), kVocab), comm(),
                                 torch::kCPU);
  ::setenv("MYGPT_TEST_PERTURB_RANK", (std::to_string(last) + ":2").c_str(), 1);
  RankConsistencyCheck check(comm(), /*every=*/2);
  ::unsetenv("MYGPT_TEST_PERTURB_RANK");
  std::string failure;
  int ended_with = 0;
  for (int64_t step = 0; step < 4 && failure.empty() && ended_with == 0; ++step) {
    run->train_step(step);
    try {
      check.after_step(step, *run->model());
    } catch (const std::runtime_error& e) {
      failure = strprintf("step %lld: ", static_cast<long long>(step)) + e.what();
      comm().barrier();
    } catch (const EndedByRankZero& e) {
      ended_with = e.exit_code();
    }
  }
  if (comm().rank() == 0) {
    const std::string expected = "step 3: after step 3 the ranks hold different parameters (--check-ranks-every 2): " +
                                 std::string(last == 1 ? "rank 0 holds" : "ranks 0, 1 hold") + " parameters of checksum ";
    EXPECT_EQ(failure.substr(0, expected.size()), expected) << failure;
    EXPECT_NE(failure.find("; rank " + std::to_string(last) + " holds parameters of checksum "), std::string::npos)
        << failure;
  } else {
    EXPECT_EQ(ended_with, 1);
    EXPECT_EQ(failure, "");
  }
}

TEST(RankChecksumsText, GroupsTheRanksLargestGroupFirst) {
  EXPECT_EQ(rank_checksums_text({7, 9, 7}), "ranks 0, 2 hold parameters of checksum 0000000000000007; rank 1 holds "
                                            "parameters of checksum 0000000000000009");
  EXPECT_EQ(rank_checksums_text({5, 5}), "ranks 0, 1 hold parameters of checksum 0000000000000005");
}


}  // namespace
}  // namespace mygpt

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mygpt::JobSession job;
  if (!job.world().uses_mpi) {
    std::cerr << "mygpt_rank_consistency_tests: start me under mpirun (mpirun -np 2 " << argv[0] << ")" << std::endl;
    return 1;
  }
  torch::set_num_threads(1);
  mygpt::print_only_failures_off_rank_zero(job.world().rank);
  int any_failed = 0;
  {
    mygpt::MpiCommunicator mpi(MPI_COMM_WORLD, job.thread_serialized());
    mygpt::g_comm = &mpi;
    auto outcome = torch::tensor({RUN_ALL_TESTS() != 0 ? 1 : 0}, torch::kLong);
    mpi.all_reduce(outcome, mygpt::ReduceOp::Max);  // a failure on any rank fails the job
    any_failed = static_cast<int>(outcome.item<int64_t>());
    mygpt::g_comm = nullptr;
  }
  return any_failed;
}
