// --cuda-graph's refusals (trainer/cuda_graph_step.h), which need no GPU: each setting the capture cannot
// hold gets one line naming the option or the device and why, and a CPU run is refused before it trains.
// The capture itself (graph replay against eager steps) is tests/cuda/test_cuda_graph.cpp's, on a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "tests/expect_refused.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"
#include "trainer/cuda_graph_step.h"

namespace mygpt::cuda_graph_test {
namespace {

const torch::Device kCuda(torch::kCUDA, 0);  // a device object only: nothing runs on it here

CudaGraphSetting on_cuda() {
  CudaGraphSetting s;
  s.device = kCuda;
  return s;
}

// The refusal of `s`: one line, naming the option first, holding `needle`.
void expect_refusal(const CudaGraphSetting& s, const std::string& needle) {
  const std::string why = cuda_graph_refusal(s);
  ASSERT_FALSE(why.empty()) << "accepted; expected a refusal mentioning " << needle;
  EXPECT_EQ(why.rfind("--cuda-graph: ", 0), 0u) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  EXPECT_NE(why.find(needle), std::string::npos) << "'" << needle << "' not in: " << why;
}

TEST(CudaGraphRefusal, EachSettingItCannotHoldIsNamed) {
  if (!cuda_graph_built()) {
    // A CPU LibTorch: every run is refused for that, a CUDA device included.
    expect_refusal(on_cuda(), "CPU LibTorch");
    return;
  }
  EXPECT_EQ(cuda_graph_refusal(on_cuda()), "") << "one process, AdamW, token data: the graph applies";

  CudaGraphSetting cpu;
  expect_refusal(cpu, "--device cpu");
  CudaGraphSetting mps;
  mps.device = torch::Device(torch::kMPS);
  expect_refusal(mps, "--device mps");

  CudaGraphSetting ranks = on_cuda();
  ranks.communicates = true;
  expect_refusal(ranks, "job of ranks");
  CudaGraphSetting zero = on_cuda();
  zero.zero = 1;
  expect_refusal(zero, "--zero 1");
  CudaGraphSetting muon = on_cuda();
  muon.optimizer = OptimizerKind::muon;
  expect_refusal(muon, "--optimizer muon");
  CudaGraphSetting recompute = on_cuda();
  recompute.recompute = Recompute::mlp;
  expect_refusal(recompute, "--recompute");
  CudaGraphSetting sft = on_cuda();
  sft.sft = true;
  expect_refusal(sft, "--sft");
  // The device comes first: a CPU run with Muon is refused for the device.
  CudaGraphSetting cpu_muon;
  cpu_muon.optimizer = OptimizerKind::muon;
  expect_refusal(cpu_muon, "--device cpu");
}

TEST(CudaGraphRefusal, ACpuRunIsRefusedBeforeItTrains) {
  ScratchDir dir;
  const std::vector<std::string> args = {"--preset", "tiny", "--block-size", "16", "--seq-len", "16",
                                         "--batch-size", "2", "--steps", "2", "--eval-every", "0",
                                         "--device", "cpu", "--cuda-graph", "true", "--out", dir.path().string()};
  expect_refused([&] { testing::cpu_trainer(args, testing::token_data(testing::random_tokens(500, 17), 17)); },
                 {"--cuda-graph", cuda_graph_built() ? "--device cpu" : "CPU LibTorch"});
}

}  // namespace
}  // namespace mygpt::cuda_graph_test
