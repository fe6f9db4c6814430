// --cuda-graph on a GPU (trainer/cuda_graph_step.h): a run whose step is captured after its warm-up steps
// and replayed trains bit for bit as the same run stepped eagerly. The replay runs the kernels the eager
// step launches, on the same addresses' values, with the same random offsets (the CUDA generator hands a
// captured kernel its offset at replay), so any difference is a defect of the capture: a host value baked
// in (a learning rate, a loss scale), an input not copied into the graph's tensors, a step counted twice or
// not at all. Attention runs PyTorch's math kernel, whose arithmetic is fixed (cuDNN's backward sums with
// atomics in no fixed order). Skips with one line where no CUDA GPU is visible.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "launcher/device.h"
#include "model/attention_backend.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"

namespace mygpt::cuda_graph_test {
namespace {

const torch::Device kCuda(torch::kCUDA, 0);
constexpr int64_t kVocab = 37;
constexpr int64_t kSteps = 9;  // 3 eager warm-up steps, the capture (replayed at once), 5 replays

TrainingData pattern_data() {
  std::vector<int64_t> v(20000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7 + i / 5) % kVocab);
  return testing::token_data(std::make_shared<InMemoryTokens>(std::move(v)), kVocab);
}

struct Trained {
  std::vector<StepResult> steps;
  std::vector<torch::Tensor> parameters;  // on the CPU, after the last step
  StateDict optimizer;
  int64_t steps_taken = 0;
  bool captured = false;
};

// kSteps steps of a fresh run (built here, so each run starts from the seed's generators).
Trained train(const std::string& precision, const std::string& dropout, bool graph, const std::string& out) {
  LocalCommunicator single;
  std::vector<std::string> args = {"--preset", "tiny", "--block-size", "16", "--seq-len", "16", "--batch-size", "8",
                                   "--grad-accum", "2", "--steps", std::to_string(kSteps), "--lr", "3e-3",
                                   "--warmup-steps", "3", "--grad-clip", "0.5", "--eval-every", "0",
                                   "--dropout", dropout, "--attention", "math", "--precision", precision,
                                   "--cuda-graph", graph ? "true" : "false", "--out", out};
  if (precision == "fp16") args.insert(args.end(), {"--loss-scale-init", "1024"});
  auto run = testing::trainer_of(testing::train_flags(args), pattern_data(), single, kCuda);
  Trained t;
  for (int64_t step = 0; step < kSteps; ++step) t.steps.push_back(run->train_step(step));
  for (const auto& p : run->model()->parameters()) t.parameters.push_back(p.detach().cpu());
  for (const auto& [name, tensor] : run->optimizer().state_dict()) t.optimizer[name] = tensor.cpu();
  t.steps_taken = run->optimizer().steps_taken();
  t.captured = run->step_graph_captured();
  return t;
}

class CudaGraph : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void TearDown() override {
    if (torch::cuda::is_available()) prefer_attention_backend(AttentionBackend::automatic, kCuda);
  }
};

TEST_P(CudaGraph, ReplayTrainsAsEagerStepsBitForBit) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible: CUDA graph test skipped";
  const auto [precision, dropout] = GetParam();
  pick_device("cuda");
  ScratchDir dir;
  const Trained eager = train(precision, dropout, false, (dir.path() / "eager").string());
  const Trained graph = train(precision, dropout, true, (dir.path() / "graph").string());
  EXPECT_FALSE(eager.captured);
  ASSERT_TRUE(graph.captured) << "--cuda-graph ran every step eagerly";
  for (int64_t step = 0; step < kSteps; ++step) {
    const StepResult& a = eager.steps[static_cast<size_t>(step)];
    const StepResult& b = graph.steps[static_cast<size_t>(step)];
    EXPECT_EQ(a.loss, b.loss) << "step " << step;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step;
    EXPECT_EQ(a.lr, b.lr) << "step " << step;
    EXPECT_EQ(a.skipped, b.skipped) << "step " << step;
    EXPECT_EQ(a.loss_scale, b.loss_scale) << "step " << step;
  }
  EXPECT_LT(graph.steps.back().loss, graph.steps.front().loss) << "the replayed steps did not train";
  ASSERT_EQ(eager.parameters.size(), graph.parameters.size());
  for (size_t k = 0; k < eager.parameters.size(); ++k) {
    EXPECT_TRUE(torch::equal(eager.parameters[k], graph.parameters[k])) << "parameter " << k;
  }
  EXPECT_EQ(eager.steps_taken, graph.steps_taken) << "AdamW's count of steps (checkpointed) after replays";
  ASSERT_EQ(eager.optimizer.size(), graph.optimizer.size());
  for (const auto& [name, tensor] : eager.optimizer) {
    EXPECT_TRUE(torch::equal(tensor, graph.optimizer.at(name))) << "optimizer state " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(PrecisionsAndDropout, CudaGraph,
                         ::testing::Values(std::make_tuple(std::string("fp32"), std::string("0")),
                                           std::make_tuple(std::string("bf16"), std::string("0")),
                                           std::make_tuple(std::string("bf16"), std::string("0.1")),
                                           std::make_tuple(std::string("fp16"), std::string("0"))),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == "0" ? std::string("") : std::string("Dropout"));
                         });

}  // namespace
}  // namespace mygpt::cuda_graph_test
