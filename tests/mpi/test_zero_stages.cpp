// --zero 2 and --zero 3 on several ranks (run under `mpirun -np 2` and `-np 3`, the MPI communicator),
// as in-process training runs built the way `train` builds them:
//  - N ranks x accumulation A reproduce 1 rank x accumulation N*A (the same global batch, every rank
//    computing that reference alone) over 16 steps, with and without accumulation, recompute and
//    clipping, within the drift that fp32 rounding allows (tests/fp32_rounding_bound.h);
//  - with A = 1 they add the same numbers in the same order as --zero 0 on the same ranks (the MPI
//    backend sums in rank order, the norm reads the same pieces): bit for bit, dropout and recompute
//    included; with accumulation they sum micro-steps and ranks in another order: within the bound;
//  - every rank holds the same (gathered) parameters after every step;
//  - a checkpoint of --zero 3 on N ranks resumes at --zero 0 on one rank, and back, and goes on as the
//    straight run does.
//
// Every rank runs every test in the same order and issues its collectives unconditionally; the exit
// status is agreed by all ranks (main).
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/job_session.h"
#include "distributed/mpi_communicator.h"
#include "tests/fp32_rounding_bound.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"
#include "trainer/checkpoint.h"

namespace mygpt {
namespace {

Communicator* g_comm = nullptr;
Communicator& comm() { return *g_comm; }
int world() { return g_comm->world_size(); }

constexpr int64_t kVocab = 23, kSteps = 16, kBatch = 4, kSeqLen = 16, kLayers = 2, kWidth = 35;

// Width 35 and vocabulary 23: parameters of odd sizes, none a multiple of the shard alignment, and a
// parameter count that neither 2 nor 3 divides; a low clip threshold so that every step clips.
std::vector<std::string> args(const std::string& out, int64_t zero, int64_t accum,
                              const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {"--preset", "tiny", "--n-embd", std::to_string(kWidth), "--n-head", "5",
                                "--block-size", "16", "--steps", std::to_string(kSteps), "--batch-size",
                                std::to_string(kBatch), "--seq-len", std::to_string(kSeqLen), "--warmup-steps", "2",
                                "--lr", "3e-3", "--eval-every", "0", "--data-order", "sequential", "--out", out,
                                "--device", "cpu", "--seed", "4", "--zero", std::to_string(zero), "--grad-accum",
                                std::to_string(accum)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TrainingData data() { return testing::token_data(testing::random_tokens(6000, kVocab, 5), kVocab); }

struct Trajectory {
  std::vector<StepResult> steps;
  std::vector<std::vector<torch::Tensor>> parameters;  // whole, after each step
};

// The largest difference between this rank's tensors and any other rank's.
double largest_difference_across_ranks(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  const torch::Tensor rows = comm().gather_rows(torch::cat(flat));
  return (rows - rows[0]).abs().max().item<double>();
}

// Trains `steps` steps from `first` (a fresh run: 0) on every rank of the job, recording each step.
Trajectory train(Trainer& trainer, int64_t first = 0, int64_t steps = kSteps) {
  Trajectory run;
  for (int64_t step = first; step < steps; ++step) {
    run.steps.push_back(trainer.train_step(step));
    run.parameters.push_back(trainer.whole_parameters());
  }
  return run;
}

Trajectory job_run(const std::vector<std::string>& a, const TrainingData& d) {
  auto trainer = testing::trainer_of(testing::train_flags(a), d, comm(), torch::kCPU);
  return train(*trainer);
}

// The reference: one rank alone with the whole global batch (every rank computes it, no collective).
Trajectory single_run(const std::vector<std::string>& a, const TrainingData& d) {
  LocalCommunicator alone;
  auto trainer = testing::trainer_of(testing::train_flags(a), d, alone, torch::kCPU);
  return train(*trainer);
}

std::vector<double> losses(const Trajectory& run) {
  std::vector<double> out;
  for (const auto& s : run.steps) out.push_back(s.loss);
  return out;
}

// The drift that fp32 rounding allows between two runs of this shape (tests/fp32_rounding_bound.h), the
// reference's losses giving its scale. Weights: AdamW moves a weight whose gradient is real by about lr a
// step, and a relative gradient error of kappa*u moves it by kappa*u of that; a weight whose gradient is
// rounding noise alone can take steps of up to lr of either sign (its loss is flat in it). So the median
// weight may differ by kappa*u*sum(lr) (in the tens of those weights, for AdamW's own division, twice
// for safety) and every weight by 2*sum(lr).
void expect_within_fp32_drift(const Trajectory& run, const Trajectory& reference, int64_t rows_per_step, const std::string& what) {
  ASSERT_EQ(run.steps.size(), reference.steps.size());
  const testing::Fp32RunShape shape{kLayers, kWidth, kSeqLen, kVocab, rows_per_step};
  const std::vector<double> bounds = testing::fp32_loss_bounds(shape, losses(reference));
  const double relative = testing::fp32_reduction_chain(shape) * testing::kFp32UnitRoundoff;
  double lr_sum = 0;
  for (size_t s = 0; s < run.steps.size(); ++s) {
    EXPECT_LE(std::abs(run.steps[s].loss - reference.steps[s].loss), bounds[s]) << what << ", step " << s;
    EXPECT_LE(std::abs(run.steps[s].grad_norm - reference.steps[s].grad_norm), relative * reference.steps[s].grad_norm)
        << what << ", gradient norm at step " << s;
    lr_sum += reference.steps[s].lr;
    std::vector<torch::Tensor> diffs;
    for (size_t k = 0; k < run.parameters[s].size(); ++k) {
      diffs.push_back((run.parameters[s][k] - reference.parameters[s][k]).abs().reshape({-1}).to(torch::kDouble));
    }
    const torch::Tensor all = torch::cat(diffs);
    EXPECT_LE(all.median().item<double>(), 2 * relative * lr_sum) << what << ", median weight at step " << s;
    EXPECT_LE(all.max().item<double>(), 2 * lr_sum) << what << ", largest weight difference at step " << s;
  }
}

void expect_bit_identical(const Trajectory& run, const Trajectory& reference, const std::string& what) {
  ASSERT_EQ(run.steps.size(), reference.steps.size());
  for (size_t s = 0; s < run.steps.size(); ++s) {
    EXPECT_EQ(run.steps[s].loss, reference.steps[s].loss) << what << ", step " << s;
    EXPECT_EQ(run.steps[s].grad_norm, reference.steps[s].grad_norm) << what << ", step " << s;
    for (size_t k = 0; k < run.parameters[s].size(); ++k) {
      EXPECT_TRUE(torch::equal(run.parameters[s][k], reference.parameters[s][k]))
          << what << ", parameter " << k << " after step " << s;
    }
  }
}

void expect_same_parameters_on_every_rank(const Trajectory& run, const std::string& what) {
  for (size_t s = 0; s < run.parameters.size(); ++s) {
    EXPECT_EQ(largest_difference_across_ranks(run.parameters[s]), 0.0) << what << ", after step " << s;
  }
}

void expect_clipping(const Trajectory& run, double clip) {
  for (size_t s = 0; s < run.steps.size(); ++s) EXPECT_GT(run.steps[s].grad_norm, clip) << "step " << s << " did not clip";
}

// A scratch folder that every rank names alike: rank 0's, broadcast. Rank 0 removes it only once every
// rank is done with it.
struct SharedScratch {
  ScratchDir mine;
  std::string path;
  SharedScratch() {
    path = mine.path().string();
    auto bytes = torch::zeros({512}, torch::kByte);
    std::copy(path.begin(), path.end(), bytes.data_ptr<uint8_t>());
    comm().broadcast(bytes, 0);
    path = std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()));
  }
  ~SharedScratch() { comm().barrier(); }
};

// A folder of this rank's own, for a run that every rank makes alone.
std::string own_folder(const std::string& path) { return path + "_rank" + std::to_string(comm().rank()); }

Trajectory joined(const Trajectory& head, const Trajectory& tail) {
  Trajectory run = head;
  run.steps.insert(run.steps.end(), tail.steps.begin(), tail.steps.end());
  run.parameters.insert(run.parameters.end(), tail.parameters.begin(), tail.parameters.end());
  return run;
}

struct Case {
  std::string name;
  int64_t accum;
  std::vector<std::string> extra;
};

const std::vector<Case> kCases = {
    {"clipping", 1, {"--grad-clip", "0.1"}},
    {"accumulation, recompute block, clipping", 2, {"--grad-clip", "0.1", "--recompute", "block"}},
    {"accumulation, recompute mlp", 3, {"--recompute", "mlp"}},
    {"untied head, clipping", 1, {"--tie-head", "false", "--grad-clip", "0.1"}},
};

class ZeroStage : public ::testing::TestWithParam<int64_t> {};

// N ranks x A == 1 rank x N*A, within fp32's drift; and every rank's parameters the same after every step.
TEST_P(ZeroStage, ReproducesOneRankWithTheWholeBatch) {
  const int64_t zero = GetParam();
  const SharedScratch scratch;
  const std::string& out = scratch.path;
  for (const Case& c : kCases) {
    const std::string what = "--zero " + std::to_string(zero) + " on " + std::to_string(world()) + " ranks, " + c.name;
    const Trajectory sharded = job_run(args(out + "/a", zero, c.accum, c.extra), data());
    const Trajectory reference = single_run(args(own_folder(out + "/b"), 0, c.accum * world(), c.extra), data());
    expect_within_fp32_drift(sharded, reference, kBatch * kSeqLen * c.accum * world(), what);
    expect_same_parameters_on_every_rank(sharded, what);
    if (c.name.find("clipping") != std::string::npos) expect_clipping(sharded, 0.1);
  }
}

// Against --zero 0 on the same ranks: the same additions without accumulation (bit for bit, dropout and
// recompute included, every rank its own dropout stream as with --zero 0), and within fp32's drift with it.
TEST_P(ZeroStage, EqualsZeroZeroOnTheSameRanks) {
  const int64_t zero = GetParam();
  const SharedScratch scratch;
  const std::string& out = scratch.path;
  for (const Case& c : kCases) {
    const std::string what = "--zero " + std::to_string(zero) + " against --zero 0, " + c.name;
    std::vector<std::string> extra = c.extra;
    extra.insert(extra.end(), {"--dropout", "0.1"});
    const Trajectory sharded = job_run(args(out + "/a", zero, c.accum, extra), data());
    const Trajectory plain = job_run(args(out + "/b", 0, c.accum, extra), data());
    if (c.accum == 1) {
      expect_bit_identical(sharded, plain, what);
    } else {
      expect_within_fp32_drift(sharded, plain, kBatch * kSeqLen * c.accum * world(), what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroStage, ::testing::Values(2, 3),
                         [](const auto& info) { return "zero" + std::to_string(info.param); });

// Resumes across stages and world sizes: --zero 3 on N ranks to step 8, then --zero 0 on one rank with
// N-fold accumulation to step 16 (and the other way round) goes on as the straight run of the second kind.
TEST(ZeroThree, CheckpointsResumeAtZeroZeroOnOneRankAndBack) {
  const SharedScratch scratch;
  const std::string& out = scratch.path;
  const int64_t half = kSteps / 2;
  const std::vector<std::string> extra = {"--grad-clip", "0.1"};
  const int64_t rows = kBatch * kSeqLen * world();
  const Trajectory single_straight = single_run(args(own_folder(out + "/straight"), 0, world(), extra), data());
  const Trajectory sharded_straight = job_run(args(out + "/sharded_straight", 3, 1, extra), data());

  // --zero 3 on N ranks, saved at step 8 by rank 0; every rank resumes it alone at --zero 0.
  {
    const std::string saved = out + "/from_sharded";
    auto first = testing::trainer_of(testing::train_flags(args(saved, 3, 1, extra)), data(), comm(), torch::kCPU);
    const Trajectory head = train(*first, 0, half);
    first->save_checkpoint_at(half);
    comm().barrier();
    LocalCommunicator alone;
    auto resumed = testing::trainer_of(testing::train_flags(args(own_folder(out + "/resumed_single"), 0, world(), extra)),
                                       data(), alone, torch::kCPU);
    EXPECT_EQ(resumed->restore(load_checkpoint(checkpoint_path(saved, half))), half);
    const Trajectory tail = train(*resumed, half, kSteps);
    expect_within_fp32_drift(joined(head, tail), single_straight, rows, "--zero 3 x N resumed at --zero 0 x 1");
    comm().barrier();
  }
  // --zero 0 on one rank (rank 0 trains and writes), resumed at --zero 3 on N ranks.
  {
    const std::string saved = out + "/from_single";
    Trajectory head;
    if (comm().rank() == 0) {
      LocalCommunicator alone;
      auto first = testing::trainer_of(testing::train_flags(args(saved, 0, world(), extra)), data(), alone, torch::kCPU);
      head = train(*first, 0, half);
      first->save_checkpoint_at(half);
    }
    comm().barrier();
    auto resumed =
        testing::trainer_of(testing::train_flags(args(out + "/resumed_sharded", 3, 1, extra)), data(), comm(), torch::kCPU);
    EXPECT_EQ(resumed->restore(load_checkpoint(checkpoint_path(saved, half))), half);
    const Trajectory tail = train(*resumed, half, kSteps);
    if (comm().rank() == 0) {
      expect_within_fp32_drift(joined(head, tail), sharded_straight, rows, "--zero 0 x 1 resumed at --zero 3 x N");
    }
    expect_same_parameters_on_every_rank(tail, "resumed at --zero 3");
  }
}

// --zero 3 never builds the model whole: each rank draws (or, with --init-from, reads) only its piece of
// each parameter, one parameter at a time. It starts from exactly the values --zero 0 starts from, and
// leaves the generators where --zero 0 leaves them: the same first loss and the same parameters after
// every step, bit for bit, from scratch (EqualsZeroZeroOnTheSameRanks, with dropout) and from a checkpoint
// (here, also with dropout and an untied head).
TEST(ZeroThree, StartsFromStoredWeightsAsZeroZeroDoes) {
  const SharedScratch scratch;
  const std::string& out = scratch.path;
  const std::vector<std::string> extra = {"--tie-head", "false", "--dropout", "0.1"};
  const std::string stored = out + "/stored";
  {
    auto first = testing::trainer_of(testing::train_flags(args(stored, 0, 1, extra)), data(), comm(), torch::kCPU);
    train(*first, 0, 3);
    first->save_checkpoint_at(3);
    comm().barrier();
  }
  std::vector<std::string> from = extra;
  from.insert(from.end(), {"--init-from", checkpoint_path(stored, 3).string()});
  std::map<int64_t, Trajectory> runs;
  for (const int64_t zero : {int64_t{0}, int64_t{3}}) {
    auto trainer = testing::trainer_of(testing::train_flags(args(out + "/init" + std::to_string(zero), zero, 1, from)),
                                       data(), comm(), torch::kCPU);
    runs[zero] = train(*trainer, 0, 4);
  }
  expect_bit_identical(runs.at(3), runs.at(0), "--zero 3 --init-from a checkpoint against --zero 0");
  expect_same_parameters_on_every_rank(runs.at(3), "--zero 3 --init-from a checkpoint");
}

// A checkpoint of --zero 3 holds the whole weights and AdamW state under --zero 0's names and shapes,
// and the same values as --zero 0's on the same ranks (bit for bit: the runs add alike without accumulation).
TEST(ZeroThree, CheckpointHoldsWhatZeroZeroWrites) {
  const SharedScratch scratch;
  const std::string& out = scratch.path;
  std::map<int64_t, StateDict> saved;
  for (const int64_t zero : {int64_t{0}, int64_t{3}}) {
    const std::string run_dir = out + "/zero" + std::to_string(zero);
    auto trainer = testing::trainer_of(testing::train_flags(args(run_dir, zero, 1, {"--grad-clip", "0.1"})), data(),
                                       comm(), torch::kCPU);
    train(*trainer, 0, 4);
    trainer->save_checkpoint_at(4);
    comm().barrier();
    saved[zero] = load_checkpoint(checkpoint_path(run_dir, 4)).tensors;
  }
  const StateDict& plain = saved.at(0);
  const StateDict& sharded = saved.at(3);
  EXPECT_EQ(plain.size(), sharded.size());
  for (const auto& [name, tensor] : plain) {
    if (name == "rng.cpu" || name.rfind("loader.", 0) == 0 || name == "world_size") continue;
    ASSERT_TRUE(sharded.count(name)) << name;
    EXPECT_TRUE(sharded.at(name).sizes().equals(tensor.sizes())) << name;
    EXPECT_TRUE(torch::equal(sharded.at(name), tensor)) << name;
  }
}

}  // namespace
}  // namespace mygpt

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mygpt::JobSession job;
  if (!job.world().uses_mpi) {
    std::cerr << "mygpt_mpi_zero_tests: start me under mpirun (mpirun -np 2 " << argv[0] << ")" << std::endl;
    return 1;
  }
  torch::set_num_threads(1);
  int any_failed = 0;
  {
    mygpt::MpiCommunicator mpi(MPI_COMM_WORLD, job.thread_serialized());
    mygpt::g_comm = &mpi;
    auto outcome = torch::tensor({RUN_ALL_TESTS() != 0 ? 1 : 0}, torch::kLong);
    mpi.all_reduce(outcome, mygpt::ReduceOp::Max);
    any_failed = static_cast<int>(outcome.item<int64_t>());
    mygpt::g_comm = nullptr;
  }
  return any_failed;
}
