// The chunked (fused) head + cross-entropy against the plain full-logits path: loss, gradients with
// respect to the hidden states and the tied weight, whole-model gradients, bf16 autocast, per-token
// losses for evaluation, last-position logits for sampling, and the HellaSwag pick from losses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/chunked_lm_loss.h"
#include "model/gpt.h"
#include "model/gpt_config.h"
#include "model/widening_sum.h"
#include "model/mixed_precision.h"

namespace mygpt::chunked_loss_test {
namespace {

namespace F = torch::nn::functional;

struct HeadInputs {
  torch::Tensor hidden, weight, targets;
};

// Random head inputs with logits of a realistic spread (a few units), so softmax is not uniform.
HeadInputs head_inputs(int64_t rows, int64_t vocab, int64_t width, uint64_t seed = 0) {
  torch::manual_seed(seed);
  return {torch::randn({rows, width}).requires_grad_(), (0.5 * torch::randn({vocab, width})).requires_grad_(),
          torch::randint(vocab, {rows}, torch::kLong)};
}

struct LossAndGrads {
  torch::Tensor loss, grad_hidden, grad_weight;
};

// Runs `loss_of(hidden, weight, targets)` and its backward with an upstream gradient of 2.5 (as a
// loss scaled for gradient accumulation would have), on fresh leaves.
template <typename LossFn>
LossAndGrads run(const HeadInputs& in, LossFn&& loss_of) {
  auto hidden = in.hidden.detach().clone().requires_grad_();
  auto weight = in.weight.detach().clone().requires_grad_();
  auto loss = loss_of(hidden, weight, in.targets);
  (2.5 * loss).backward();
  return {loss.detach(), hidden.grad(), weight.grad()};
}

torch::Tensor plain_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets) {
  return F::cross_entropy(torch::linear(hidden, weight).to(torch::kFloat), targets);
}

void expect_close(const torch::Tensor& actual, const torch::Tensor& expected, double rtol, double atol,
                  const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  EXPECT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(torch::allclose(actual, expected, rtol, atol))
      << what << ": max abs difference " << (actual - expected).abs().max().item<double>();
}

TEST(ChunkedLmLoss, EqualsThePlainLossAndItsGradientsForAnyChunking) {
  struct Case {
    int64_t rows, vocab, chunk_rows;
  };
  // Chunks that divide the rows, that do not (a short last chunk), one row per chunk, a single row,
  // one chunk larger than all rows, and the memory-chosen size. Chunks split rows only, so the
  // vocabulary (prime sizes here) never has to divide anything.
  const std::vector<Case> cases = {{36, 23, 6}, {36, 23, 12}, {37, 23, 5},  {37, 23, 1},
                                   {1, 23, 4},  {1, 23, 1},   {20, 97, 64}, {37, 31, 0}};
  for (const Case& c : cases) {
    const auto in = head_inputs(c.rows, c.vocab, 8, static_cast<uint64_t>(c.rows * 100 + c.chunk_rows));
    const auto fused = run(in, [&](auto h, auto w, auto t) { return chunked_lm_loss(h, w, t, {.chunk_rows = c.chunk_rows}); });
    const auto plain = run(in, plain_loss);
    const std::string what = "rows " + std::to_string(c.rows) + " chunk " + std::to_string(c.chunk_rows);
    EXPECT_EQ(fused.loss.scalar_type(), torch::kFloat);
    EXPECT_EQ(fused.loss.dim(), 0);
    expect_close(fused.loss, plain.loss, 1e-6, 1e-6, what + " loss");
    expect_close(fused.grad_hidden, plain.grad_hidden, 1e-5, 1e-7, what + " grad hidden");
    expect_close(fused.grad_weight, plain.grad_weight, 1e-5, 1e-7, what + " grad weight");
  }
}

TEST(ChunkedLmLoss, OnlyTheHiddenStatesMayNeedAGradient) {
  auto in = head_inputs(9, 13, 4);
  auto hidden = in.hidden.detach().clone().requires_grad_();
  const auto frozen_weight = in.weight.detach();
  chunked_lm_loss(hidden, frozen_weight, in.targets, {.chunk_rows = 4}).backward();
  auto reference = in.hidden.detach().clone().requires_grad_();
  plain_loss(reference, frozen_weight, in.targets).backward();
  expect_close(hidden.grad(), reference.grad(), 1e-5, 1e-7, "grad hidden");
}

TEST(ChunkedLmLoss, ARetainedGraphGivesTheSameGradientEachBackward) {
  const auto in = head_inputs(10, 17, 4);
  auto hidden = in.hidden.detach().clone().requires_grad_();
  auto loss = chunked_lm_loss(hidden, in.weight.detach(), in.targets, {.chunk_rows = 3});
  loss.backward({}, /*retain_graph=*/true);
  const auto once = hidden.grad().clone();
  loss.backward();
  expect_close(hidden.grad(), 2 * once, 1e-6, 0, "accumulated over two backwards");
}

TEST(ChunkedLmLoss, PerRowLossesEqualThePlainUnreducedCrossEntropy) {
  const auto in = head_inputs(29, 41, 8);
  const auto losses = chunked_lm_token_losses(in.hidden, in.weight, in.targets, {.chunk_rows = 7});
  const auto expected = F::cross_entropy(torch::linear(in.hidden, in.weight), in.targets,
                                         F::CrossEntropyFuncOptions().reduction(torch::kNone));
  EXPECT_FALSE(losses.requires_grad());
  expect_close(losses, expected.detach(), 1e-6, 1e-6, "per-row losses");
}

TEST(ChunkedLmLoss, UnderBf16AutocastMatmulsRunInBf16AndTheLossInFp32) {
  const auto in = head_inputs(45, 57, 16, 5);
  LossAndGrads fused, plain;
  {
    AutocastScope autocast(torch::kCPU, Precision::bf16);
    fused = run(in, [](auto h, auto w, auto t) { return chunked_lm_loss(h, w, t, {.chunk_rows = 8}); });
    plain = run(in, plain_loss);
  }
  // Same dtypes as the plain path: fp32 loss, gradients in the leaves' fp32.
  EXPECT_EQ(fused.loss.scalar_type(), torch::kFloat);
  EXPECT_EQ(fused.grad_hidden.scalar_type(), torch::kFloat);
  EXPECT_EQ(fused.grad_weight.scalar_type(), torch::kFloat);
  // Both compute the same bf16 logits, so the losses agree far better than bf16's 3 digits ...
  expect_close(fused.loss, plain.loss, 1e-5, 1e-5, "bf16 loss");
  // ... and differ from the fp32 loss by bf16 rounding, which shows the matmul did run in bf16.
  const auto fp32 = run(in, plain_loss);
  EXPECT_GT((fused.loss - fp32.loss).abs().item<double>(), 1e-6);
  expect_close(fused.loss, fp32.loss, 2e-2, 0, "bf16 vs fp32 loss");
  // Gradients: each chunk's weight gradient is rounded to bf16 once, as the plain path's whole one is.
  const double grad_h_scale = plain.grad_hidden.abs().max().item<double>();
  const double grad_w_scale = plain.grad_weight.abs().max().item<double>();
  expect_close(fused.grad_hidden, plain.grad_hidden, 0, 2e-2 * grad_h_scale, "bf16 grad hidden");
  expect_close(fused.grad_weight, plain.grad_weight, 0, 2e-2 * grad_w_scale, "bf16 grad weight");
}

TEST(ChunkedLmLoss, UnderFp16AutocastSmallGradientsAreNotFlushedToZero) {
  // Early in training the softmax is near uniform: with 8191 tokens and 8192 rows each entry of the
  // mean's gradient softmax / N is ~1.5e-8, below half of fp16's smallest value, so in fp16 it rounds to
  // zero, and tokens that are no row's target (here all but 16) would get no gradient at all. The fused
  // loss works with the sum's gradient in fp16 and applies 1/N in fp32.
  const int64_t rows = 8192, vocab = 8191, width = 8, targets_used = 16;
  torch::manual_seed(21);
  HeadInputs in{torch::randn({rows, width}), 0.02 * torch::randn({vocab, width}),
                torch::randint(targets_used, {rows}, torch::kLong)};
  auto loss_of = [](auto h, auto w, auto t) { return chunked_lm_loss(h, w, t, {.chunk_rows = 1024}); };
  const auto fp32 = run(in, loss_of);  // equal to the plain loss (tested above), without its 8192 x 8191 logits
  LossAndGrads fp16;
  {
    AutocastScope autocast(torch::kCPU, Precision::fp16);
    fp16 = run(in, loss_of);
  }
  // The premise: the mean's gradient of a token that is no target is below what fp16 can hold.
  const auto first_rows = torch::softmax(torch::linear(in.hidden.slice(0, 0, 1024), in.weight), 1);
  const double largest = first_rows.slice(1, targets_used).max().item<double>() / rows;
  ASSERT_LT(largest, 2.98e-8) << "the test needs mean gradients that fp16 rounds to zero";
  ASSERT_EQ(torch::tensor({largest}).to(torch::kHalf).item<float>(), 0.0f);

  auto relative_error = [](const torch::Tensor& a, const torch::Tensor& b) {
    return ((a - b).norm() / b.norm()).item<double>();
  };
  EXPECT_EQ(fp16.grad_weight.scalar_type(), torch::kFloat);
  EXPECT_LT(relative_error(fp16.loss, fp32.loss), 1e-3);
  EXPECT_LT(relative_error(fp16.grad_hidden, fp32.grad_hidden), 1e-2);
  EXPECT_LT(relative_error(fp16.grad_weight, fp32.grad_weight), 1e-2);
  const auto never_targets = [&](const torch::Tensor& g) { return g.slice(0, targets_used); };
  EXPECT_GT(never_targets(fp16.grad_weight).abs().min().item<double>(), 0) << "a token's gradient was flushed";
  EXPECT_LT(relative_error(never_targets(fp16.grad_weight), never_targets(fp32.grad_weight)), 1e-2);
}

TEST(ChunkedLmLoss, ChunkRowsFollowTheMemoryBudget) {
  // GPT-2's vocabulary at a narrow width: the budget decides, and one chunk's fp32 logits fit in it.
  const int64_t rows = lm_loss_chunk_rows(50304, 64);
  EXPECT_GE(rows, 64);
  EXPECT_LE(rows * 50304 * 4, int64_t{64} << 20);
  EXPECT_GT((rows + 1) * 50304 * 4, int64_t{64} << 20);
  // Wide models get at least n_embd rows per chunk; tiny vocabularies get huge chunks.
  EXPECT_EQ(lm_loss_chunk_rows(50304, 1600), 1600);
  EXPECT_GE(lm_loss_chunk_rows(17, 32), 100000);
  // A GPU takes 1 GiB of fp32 logits per chunk: 5336 rows of GPT-2, 16x the CPU's.
  EXPECT_EQ(lm_loss_chunk_rows(50304, 768, c10::DeviceType::CUDA), (int64_t{1} << 30) / (50304 * 4));
  EXPECT_EQ(lm_loss_chunk_rows(50304, 768, c10::DeviceType::CPU), 768);
}

TEST(ChunkedLmLoss, CudaKernelOptionLeavesCpuInputsOnTheAtenPath) {
  // The kernel is for CUDA tensors; on CPU the option changes nothing (bit for bit).
  const auto in = head_inputs(19, 23, 8, 5);
  const auto plain = chunked_lm_token_losses(in.hidden, in.weight, in.targets, {.chunk_rows = 4});
  const auto with_option =
      chunked_lm_token_losses(in.hidden, in.weight, in.targets, {.chunk_rows = 4, .cuda_kernel = true});
  EXPECT_TRUE(torch::equal(plain, with_option));
}

// The widening sum (fp32 += bf16 @ bf16) that the CUDA kernel's path uses for the weight gradient. ATen
// has no CPU addmm with an out_dtype, so on a CPU it refuses, exactly as a LibTorch that refuses it on
// CUDA does: the separate pass must give the sum, and the process must say that this path ran (the run's
// log prints the note, and the GPU benchmark's row shows it) rather than measure it silently.
TEST(WideningSum, ARefusedWideningAddmmIsReportedAndTheSeparatePassGivesTheSum) {
  torch::manual_seed(2);
  const auto a = torch::randn({6, 5}).to(torch::kBFloat16), b = torch::randn({5, 4}).to(torch::kBFloat16);
  auto sum = torch::randn({6, 4});
  const auto expected = sum + a.mm(b).to(torch::kFloat);
  add_product_widening(sum, a, b);
  EXPECT_EQ(sum.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(sum, expected));
  ASSERT_EQ(widening_sum_path(), WideningSumPath::separate_pass);
  const std::string note = widening_sum_note();
  EXPECT_NE(note.find("separate pass"), std::string::npos) << note;
  EXPECT_NE(note.find("addmm"), std::string::npos) << note;  // ATen's own reason, its first line
  EXPECT_EQ(note.find('\n'), std::string::npos) << "one line: " << note;
  // Later sums go straight to the separate pass, and stay right.
  add_product_widening(sum, a, b);
  EXPECT_TRUE(torch::allclose(sum, expected + a.mm(b).to(torch::kFloat)));
  EXPECT_EQ(widening_sum_path(), WideningSumPath::separate_pass);
}

// ------------------------------------------------------------------------------------------------
// Through the whole model

// The "tiny" preset (2 layers, 2 heads, 32 wide, block 32) with a vocabulary of its own; the same weights
// whatever the runtime settings.
Gpt tiny_gpt(int64_t vocab = 61, const GptRuntime& runtime = {}) {
  GptConfig c = preset_config("tiny");
  c.vocab_size = vocab;
  torch::manual_seed(11);
  return Gpt(c, runtime);
}
const GptRuntime kUnfused{.fused_loss = false};

torch::Tensor tokens(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(vocab, {b, t}, torch::kLong);
}

TEST(FusedLoss, IsOnByDefaultAndCanBeSwitchedOff) {
  EXPECT_TRUE(tiny_gpt()->runtime().fused_loss);
  EXPECT_FALSE(tiny_gpt(61, kUnfused)->runtime().fused_loss);
}

TEST(FusedLoss, EveryParameterGradientEqualsThePlainPaths) {
  const auto idx = tokens(3, 16, 61, 1), targets = tokens(3, 16, 61, 2);
  auto gradients = [&](bool fused) {
    Gpt model = tiny_gpt(61, fused ? GptRuntime{} : kUnfused);
    auto loss = model->loss(idx, targets);
    loss.backward();
    std::vector<torch::Tensor> grads{loss.detach()};
    for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  const auto plain = gradients(false);
  const auto fused = gradients(true);
  ASSERT_EQ(fused.size(), plain.size());
  expect_close(fused[0], plain[0], 1e-6, 1e-6, "loss");
  const auto names = tiny_gpt()->named_parameters().keys();
  for (size_t i = 1; i < fused.size(); ++i) {
    // Relative to the tensor's own scale: some entries are tiny sums of cancelling terms.
    const double scale = plain[i].abs().max().item<double>();
    expect_close(fused[i], plain[i], 1e-5, 1e-5 * scale, names[i - 1]);
  }
}

TEST(FusedLoss, ValidationLossWithoutGradientsEqualsThePlainOne) {
  Gpt model = tiny_gpt(), unfused = tiny_gpt(61, kUnfused);
  model->eval();
  unfused->eval();
  torch::NoGradGuard no_grad;
  const auto idx = tokens(2, 12, 61, 3), targets = tokens(2, 12, 61, 4);
  const auto fused = model->loss(idx, targets);
  expect_close(fused, unfused->loss(idx, targets), 1e-6, 1e-6, "no-grad loss");
}

TEST(FusedLoss, Bf16AutocastLossAgreesWithThePlainOne) {
  Gpt model = tiny_gpt(), unfused = tiny_gpt(61, kUnfused);
  const auto idx = tokens(2, 16, 61, 5), targets = tokens(2, 16, 61, 6);
  AutocastScope autocast(torch::kCPU, Precision::bf16);
  const auto fused = model->loss(idx, targets).detach();
  const auto plain = unfused->loss(idx, targets).detach();
  EXPECT_EQ(fused.scalar_type(), torch::kFloat);
  expect_close(fused, plain, 1e-2, 0, "bf16 model loss");
}

TEST(FusedLoss, TokenLossesEqualThePlainPerTokenCrossEntropy) {
  Gpt model = tiny_gpt();
  model->eval();
  const auto idx = tokens(3, 10, 61, 7), targets = tokens(3, 10, 61, 8);
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    const auto logits = model->forward(idx);
    expected = F::cross_entropy(logits.view({-1, 61}), targets.reshape({-1}),
                                F::CrossEntropyFuncOptions().reduction(torch::kNone))
                   .view({3, 10});
  }
  for (bool fused : {true, false}) {
    const auto losses = tiny_gpt(61, fused ? GptRuntime{} : kUnfused)->loss(idx, targets, LossReduction::none);
    EXPECT_EQ(losses.scalar_type(), torch::kFloat);
    expect_close(losses, expected, 1e-6, 1e-6, fused ? "fused token losses" : "plain token losses");
  }
}

TEST(FusedLoss, LastTokenLogitsAreTheLastRowOfTheFullLogits) {
  Gpt model = tiny_gpt();
  model->eval();
  torch::NoGradGuard no_grad;
  const auto idx = tokens(2, 9, 61, 9);
  const auto last = model->forward(idx, {.last_position_only = true});
  EXPECT_EQ(last.sizes(), (std::vector<int64_t>{2, 61}));
  expect_close(last, model->forward(idx).select(1, -1), 1e-6, 1e-6, "last-position logits");
}

}  // namespace
}  // namespace mygpt::chunked_loss_test
