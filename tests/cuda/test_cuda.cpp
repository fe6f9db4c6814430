// Tests of the CUDA and NCCL paths (CTest label `cuda`). Each one skips with one line where no CUDA GPU
// is visible, so the suite passes on machines with 0, 1 or 8 GPUs; scripts/gpu_check.sh runs them on a
// GPU node. One GPU allows one NCCL rank, so the NCCL tests present a 1-rank communicator as a larger
// world of identical ranks (WorldOfCopies) to drive the code paths of several ranks.
#include <ATen/SDPBackend.h>
#include <ATen/cuda/CUDAContext.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "distributed/gradient_sync.h"
#include "distributed/nccl_communicator.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "model/sampling.h"
#include "tests/fp32_rounding_bound.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tests/training_fixture.h"
#include "model/mixed_precision.h"
#include "trainer/muon.h"
#include "trainer/stateful_parts.h"

namespace mygpt::cuda_test {
namespace {

#define REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible: CUDA test skipped"

constexpr int64_t kVocab = 37;
const torch::Device kCuda(torch::kCUDA, 0);

std::vector<std::string> tiny_args(const std::string& out, const std::string& precision, const std::string& steps) {
  return {"--preset", "tiny", "--block-size",   "16", "--seq-len",    "16", "--batch-size", "8",       "--steps", steps,
          "--lr",     "3e-3", "--warmup-steps", "2",  "--eval-every", "0",  "--precision",  precision, "--out",   out};
}

std::unique_ptr<Trainer> trainer_on(const torch::Device& device, const std::vector<std::string>& args,
                                    const TrainingData& data, Communicator& comm) {
  return testing::trainer_of(testing::train_flags(args), data, comm, device);
}

// Ordered data a small model learns quickly, so losses fall visibly.
TrainingData pattern_data() {
  std::vector<int64_t> v(20000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7 + i / 5) % kVocab);
  return testing::token_data(std::make_shared<InMemoryTokens>(std::move(v)), kVocab);
}

// The CPU and the GPU round fp32 differently (summation orders, exp/log), so their losses drift apart by
// at most the bound derived from fp32's unit roundoff, the model's reductions and the run's own losses
// (tests/fp32_rounding_bound.h, which tests/test_fp32_rounding_bound.cpp checks on the CPU).
TEST(Cuda, Fp32LossesEqualTheCpuRun) {
  REQUIRE_CUDA();
  ScratchDir dir;
  LocalCommunicator single;
  const TrainingData data = pattern_data();
  constexpr int64_t kSteps = 20;
  auto cpu = trainer_on(torch::kCPU, tiny_args((dir.path() / "cpu").string(), "fp32", "20"), data, single);
  pick_device("cuda");
  at::globalContext().setFloat32MatmulPrecision("highest");  // TF32 off: compare true fp32 arithmetic
  auto gpu = trainer_on(kCuda, tiny_args((dir.path() / "gpu").string(), "fp32", "20"), data, single);
  std::vector<double> reference;
  for (int64_t step = 0; step < kSteps; ++step) reference.push_back(cpu->train_step(step).loss);
  // tiny_args: the tiny preset (2 layers, 32 wide), T=16, B=8.
  const auto bounds = testing::fp32_loss_bounds({2, 32, 16, kVocab, 8 * 16}, reference);
  for (int64_t step = 0; step < kSteps; ++step) {
    EXPECT_NEAR(gpu->train_step(step).loss, reference[step], bounds[step]) << "step " << step;
  }
  at::globalContext().setFloat32MatmulPrecision("high");
}

// --optimizer muon on CUDA: the Newton-Schulz iteration runs in bf16 there (fp32 on the CPU), so the
// runs differ by bf16 rounding of the orthogonalized updates, not more; and the model learns.
TEST(Cuda, MuonWithBf16NewtonSchulzTracksTheCpuRun) {
  REQUIRE_CUDA();
  ScratchDir dir;
  LocalCommunicator single;
  const TrainingData data = pattern_data();
  auto args = [&](const std::string& name) {
    auto a = tiny_args((dir.path() / name).string(), "fp32", "20");
    a.insert(a.end(), {"--optimizer", "muon"});
    return a;
  };
  auto cpu = trainer_on(torch::kCPU, args("cpu"), data, single);
  pick_device("cuda");
  auto gpu = trainer_on(kCuda, args("gpu"), data, single);
  double first = 0, last = 0;
  for (int64_t step = 0; step < 20; ++step) {
    const double a = cpu->train_step(step).loss, b = gpu->train_step(step).loss;
    EXPECT_NEAR(b, a, 0.03 * std::abs(a)) << "step " << step;
    if (step == 0) first = b;
    last = b;
  }
  EXPECT_LT(last, 0.8 * first);
  const torch::Tensor x = newton_schulz_orthogonalize(torch::randn({64, 32}, kCuda).to(torch::kBFloat16), 5);
  EXPECT_EQ(x.scalar_type(), torch::kBFloat16);
  const torch::Tensor s = torch::linalg_svdvals(x.to(torch::kFloat));
  EXPECT_GT(s.min().item<double>(), 0.5);
  EXPECT_LT(s.max().item<double>(), 1.3);
}

TEST(Cuda, Bf16AutocastTrainsWithFp32MasterWeights) {
  REQUIRE_CUDA();
  ScratchDir dir;
  LocalCommunicator single;
  auto run = trainer_on(kCuda, tiny_args(dir.path().string(), "bf16", "40"), pattern_data(), single);
  const double first = run->train_step(0).loss;
  double last = first;
  for (int64_t step = 1; step < 40; ++step) last = run->train_step(step).loss;
  EXPECT_LT(last, 0.8 * first);
  for (const auto& p : run->model()->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);
  for (const auto& [name, t] : run->optimizer().state_dict()) {
    if (t.is_floating_point()) {
      EXPECT_EQ(t.scalar_type(), torch::kFloat) << name;
    }
  }
}

// --precision fp16 on CUDA: fp16 autocast with the dynamic loss scale tracks the fp32 run, and --precision
// auto picks bf16 on GPUs that have it (compute capability 8.0+), fp16 on older ones.
TEST(Cuda, Fp16WithLossScalingTracksFp32) {
  REQUIRE_CUDA();
  ScratchDir dir;
  LocalCommunicator single;
  const TrainingData data = pattern_data();
  pick_device("cuda");
  auto half = trainer_on(kCuda, tiny_args((dir.path() / "fp16").string(), "fp16", "40"), data, single);
  auto full = trainer_on(kCuda, tiny_args((dir.path() / "fp32").string(), "fp32", "40"), data, single);
  int64_t skipped = 0;
  double first = 0, last = 0;
  for (int64_t step = 0; step < 40; ++step) {
    const StepResult h = half->train_step(step);
    const StepResult f = full->train_step(step);
    skipped += h.skipped ? 1 : 0;
    EXPECT_TRUE(std::isfinite(h.loss)) << "step " << step;
    EXPECT_GE(h.loss_scale, 1.0) << "step " << step;
    if (!h.skipped && skipped == 0) {
      EXPECT_NEAR(h.loss, f.loss, 0.03 * std::abs(f.loss)) << "step " << step;
    }
    if (step == 0) first = h.loss;
    last = h.loss;
  }
  EXPECT_LE(skipped, 4);
  EXPECT_LT(last, 0.8 * first);
  for (const auto& p : half->model()->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);
  const bool has_bf16 = at::cuda::getCurrentDeviceProperties()->major >= 8;
  EXPECT_EQ(precision_for_device(Precision::automatic, kCuda), has_bf16 ? Precision::bf16 : Precision::fp16);
  EXPECT_EQ(precision_for_device(Precision::automatic, torch::kCPU), Precision::fp32);
}

TEST(Cuda, Bf16AttentionUsesAFlashKernel) {
  REQUIRE_CUDA();
  auto q = torch::randn({4, 12, 256, 64}, torch::TensorOptions().dtype(torch::kBFloat16).device(kCuda));
  const auto backend = static_cast<at::SDPBackend>(at::_fused_sdp_choice(q, q, q, {}, 0.0, /*is_causal=*/true));
  EXPECT_TRUE(backend == at::SDPBackend::flash_attention || backend == at::SDPBackend::cudnn_attention)
      << "SDPA chose backend " << static_cast<int>(backend) << " (1: flash, 3: cuDNN flash)";
}

// Resume is compared where it is exact: the same device and deterministic kernels, so the resumed losses
// equal the straight run's bit for bit. (On an H100, cuDNN's attention backward, which accumulates with
// atomics, made two runs of the same steps differ in the 5th digit: evidence/gpu-runs/2026-11-26-h100.) The
// math attention kernel and PyTorch's deterministic mode (cuBLAS with a fixed workspace) remove that.
TEST(Cuda, CheckpointFromCudaSamplesOnCpuAndResumesOnCuda) {
  REQUIRE_CUDA();
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/1);  // before this process's first cuBLAS handle
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  ScratchDir dir;
  LocalCommunicator single;
  const TrainingData data = pattern_data();
  auto deterministic_args = [](const std::string& out) {
    auto args = tiny_args(out, "bf16", "6");
    args.insert(args.end(), {"--attention", "math"});
    return args;
  };
  const auto args = deterministic_args(dir.path().string());
  auto straight = trainer_on(kCuda, deterministic_args((dir.path() / "straight").string()), data, single);
  std::vector<double> expected;
  for (int64_t step = 0; step < 6; ++step) expected.push_back(straight->train_step(step).loss);
  {
    auto first = trainer_on(kCuda, args, data, single);
    for (int64_t step = 0; step < 3; ++step) first->train_step(step);
    first->save_checkpoint_at(3);
  }
  const Checkpoint ckpt = load_checkpoint(checkpoint_path(dir.path(), 3));
  Gpt on_cpu = model_from_checkpoint(ckpt);  // read on the CPU
  const auto sample = generate(on_cpu, torch::zeros({1, 1}, torch::kLong), SamplingOptions{8, 1.0, 0});
  EXPECT_EQ(sample.size(1), 9);
  auto resumed = trainer_on(kCuda, args, data, single);
  resumed->restore(ckpt);
  for (int64_t step = 3; step < 6; ++step) EXPECT_EQ(resumed->train_step(step).loss, expected[step]) << step;
  at::globalContext().setDeterministicAlgorithms(false, false);
}

TEST(Cuda, GeneratorStateRoundTrips) {
  REQUIRE_CUDA();
  RandomState state(kCuda);
  torch::manual_seed(5);
  const StateDict saved = state.state_dict();
  ASSERT_TRUE(saved.count("device_cuda"));
  const auto a = torch::rand({16}, torch::TensorOptions().device(kCuda));
  state.load_state_dict(saved);
  const auto b = torch::rand({16}, torch::TensorOptions().device(kCuda));
  EXPECT_TRUE(torch::equal(a, b));
}

// A 1-rank NCCL communicator presented as `world` identical ranks: a sum comes back `world` times the
// input, an average or a maximum unchanged, just as all-reduces over identical ranks would.
class WorldOfCopies final : public Communicator {
 public:
  WorldOfCopies(Communicator& inner, int world) : inner_(inner), world_(world) {}
  int rank() const override { return 0; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return inner_.backend_name(); }
  void all_reduce(torch::Tensor& t, ReduceOp op) override {
    inner_.all_reduce(t, op);
    if (op == ReduceOp::Sum) t.mul_(world_);
  }
  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor t, ReduceOp op) override {
    if (op == ReduceOp::Sum) throw std::logic_error("WorldOfCopies: async sums are not modelled");
    return inner_.all_reduce_async(t, op);
  }
  void broadcast(torch::Tensor& t, int root) override { inner_.broadcast(t, root); }
  void barrier() override { inner_.barrier(); }
  using Communicator::all_reduce;
  using Communicator::broadcast;

 private:
  Communicator& inner_;
  int world_;
};

std::unique_ptr<Communicator> one_rank_nccl() {
  LocalCommunicator bootstrap;
  try {
    return make_nccl_communicator(bootstrap, 0, /*timeout_seconds=*/60,
                                  [](const std::string& message) { ADD_FAILURE() << "watchdog: " << message; });
  } catch (const std::invalid_argument&) {
    return nullptr;  // this build has no NCCL backend
  }
}

// The KV cache on a GPU: greedy tokens equal the uncached path's across the block size (TF32 off, so
// both paths do fp32 arithmetic), and under bf16 autocast the cache holds what the attention makes.
TEST(Cuda, KvCacheGreedyTokensEqualTheUncachedPath) {
  REQUIRE_CUDA();
  at::globalContext().setFloat32MatmulPrecision("highest");
  GptConfig config = preset_config("tiny");
  config.block_size = 16;
  config.vocab_size = kVocab;
  torch::manual_seed(3);
  Gpt model(config);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.copy_(0.3 * torch::randn_like(p));
  }
  model->to(kCuda);
  const auto prompts = torch::randint(kVocab, {3, 5}, torch::kLong).to(kCuda);
  SamplingOptions greedy{/*max_new_tokens=*/30, /*temperature=*/0.0, /*top_k=*/0, /*vocab_limit=*/0};
  const auto cached = generate(model, prompts, greedy);
  greedy.kv_cache = false;
  EXPECT_TRUE(torch::equal(cached, generate(model, prompts, greedy)));
  greedy.kv_cache = true;
  torch::Tensor bf16;
  {
    AutocastScope autocast(kCuda, Precision::bf16);
    bf16 = generate(model, prompts, greedy);
  }
  EXPECT_EQ(bf16.sizes(), cached.sizes());
  at::globalContext().setFloat32MatmulPrecision("high");
}

TEST(Nccl, CollectivesOfEveryTypeAndOp) {
  REQUIRE_CUDA();
  auto nccl = one_rank_nccl();
  if (!nccl) GTEST_SKIP() << "this build has no NCCL backend";
  WorldOfCopies world(*nccl, 4);
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kLong, torch::kByte}) {
    const auto input = torch::arange(1, 9, torch::TensorOptions().dtype(dtype).device(kCuda));
    auto sum = input.clone(), avg = input.clone(), max = input.clone();
    world.all_reduce(sum, ReduceOp::Sum);
    world.all_reduce(max, ReduceOp::Max);
    if (dtype != torch::kByte) world.all_reduce(avg, ReduceOp::Average);
    EXPECT_TRUE(torch::equal(sum.cpu(), (input * 4).cpu())) << dtype;
    EXPECT_TRUE(torch::equal(max.cpu(), input.cpu())) << dtype;
    EXPECT_TRUE(torch::equal(avg.cpu(), input.cpu())) << dtype;
  }
  auto b = torch::arange(5, torch::TensorOptions().dtype(torch::kFloat).device(kCuda));
  nccl->broadcast(b, 0);
  EXPECT_TRUE(torch::equal(b.cpu(), torch::arange(5, torch::kFloat)));
  const auto rows = nccl->gather_rows(torch::ones({3}, torch::TensorOptions().device(kCuda)));
  EXPECT_EQ(rows.sizes(), (std::vector<int64_t>{1, 3}));
  nccl->barrier();
  std::vector<torch::Tensor> list = {torch::ones({2}, kCuda), torch::full({3}, 2.0, kCuda)};
  world.all_reduce(list, ReduceOp::Sum);
  EXPECT_TRUE(torch::equal(list[1].cpu(), torch::full({3}, 8.0)));
}

// NCCL's reduce-scatter and all-gather (--zero 1) on a real 1-rank communicator: in place, the whole
// tensor is this rank's chunk, so a sum leaves it as it was.
TEST(Nccl, ReduceScatterAndAllGatherInPlace) {
  REQUIRE_CUDA();
  auto nccl = one_rank_nccl();
  if (!nccl) GTEST_SKIP() << "this build has no NCCL backend";
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const auto input = torch::arange(1, 9, torch::TensorOptions().dtype(dtype).device(kCuda));
    auto t = input.clone();
    nccl->reduce_scatter_async(t, ReduceOp::Sum)->wait();
    EXPECT_TRUE(torch::equal(t.cpu(), input.cpu())) << dtype;
    nccl->all_gather_async(t)->wait();
    EXPECT_TRUE(torch::equal(t.cpu(), input.cpu())) << dtype;
  }
}

// --zero 1 on CUDA, through NCCL's reduce-scatter and all-gather, trains as --zero 0 does.
TEST(Nccl, ZeroOneTrainsAsZeroZero) {
  REQUIRE_CUDA();
  auto nccl = one_rank_nccl();
  if (!nccl) GTEST_SKIP() << "this build has no NCCL backend";
  ScratchDir dir;
  LocalCommunicator single;
  const TrainingData data = pattern_data();
  pick_device("cuda");
  auto args = [&](const std::string& name, const std::string& zero) {
    auto a = tiny_args((dir.path() / name).string(), "bf16", "10");
    a.insert(a.end(), {"--zero", zero, "--grad-clip", "0.5"});
    return a;
  };
  auto plain = trainer_on(kCuda, args("plain", "0"), data, single);
  auto sharded = trainer_on(kCuda, args("sharded", "1"), data, *nccl);
  for (int64_t step = 0; step < 10; ++step) {
    const StepResult a = plain->train_step(step), b = sharded->train_step(step);
    EXPECT_NEAR(a.loss, b.loss, 1e-5) << "step " << step;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * a.grad_norm) << "step " << step;
  }
}

class NcclGradientSync : public ::testing::TestWithParam<bool> {};

TEST_P(NcclGradientSync, BucketsGiveTheAveragedGradients) {
  REQUIRE_CUDA();
  auto nccl = one_rank_nccl();
  if (!nccl) GTEST_SKIP() << "this build has no NCCL backend";
  WorldOfCopies world(*nccl, 2);  // hooks and buckets as for two ranks
  torch::manual_seed(3);
  Gpt model(testing::small_config(kVocab, 16));
  model->to(kCuda);
  torch::manual_seed(3);
  Gpt reference(testing::small_config(kVocab, 16));
  reference->to(kCuda);
  GradientSynchronizer sync(model->parameters(), world, /*bucket_bytes=*/4096, /*overlap=*/GetParam());
  for (int step = 0; step < 2; ++step) {
    sync.zero_grad();
    reference->zero_grad();
    for (int micro = 0; micro < 2; ++micro) {
      auto x = torch::randint(kVocab, {4, 16}, torch::TensorOptions().dtype(torch::kLong).device(kCuda));
      sync.begin_micro_step(micro == 1);
      (model->loss(x, x) / 2.0).backward();
      (reference->loss(x, x) / 2.0).backward();
    }
    sync.finish();
    const auto mine = model->parameters(), theirs = reference->parameters();
    for (size_t k = 0; k < mine.size(); ++k) {
      EXPECT_TRUE(torch::allclose(mine[k].grad(), theirs[k].grad(), 1e-6, 1e-7)) << "parameter " << k;
    }
    EXPECT_GT(sync.last_stats().buckets, 1);
    if (GetParam()) {
      EXPECT_GT(sync.last_stats().buckets_launched_in_backward, 0);
    } else {
      EXPECT_EQ(sync.last_stats().buckets_launched_in_backward, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Overlap, NcclGradientSync, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "On" : "Off"; });

}  // namespace
}  // namespace mygpt::cuda_test
