// --optimizer muon: the Newton-Schulz iteration, which parameters go to Muon, skipping a non-finite step,
// and the whole optimizer (Muon for the blocks' matrices, AdamW for the rest) against a PyTorch
// implementation of the same algorithm written in tests/muon_reference.py, over several steps.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "launcher/run_plan.h"
#include "reference_python.h"
#include "scratch_dir.h"
#include "tests/test_support.h"
#include "trainer/adamw.h"
#include "trainer/muon.h"

#ifndef MYGPT_MUON_REFERENCE_SCRIPT
#define MYGPT_MUON_REFERENCE_SCRIPT "tests/muon_reference.py"
#endif

namespace mygpt::muon_test {
namespace {

constexpr int64_t kVocab = 19, kBlock = 16;

Gpt tiny_model(uint64_t seed) {
  torch::manual_seed(seed);
  return Gpt(testing::small_config(kVocab, kBlock));
}

torch::Tensor random_tokens(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(kVocab, {4, kBlock}, torch::kLong);
}

TEST(NewtonSchulz, GivesNearlyThePolarFactorOfTallWideAndBatchedMatrices) {
  torch::manual_seed(3);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{48, 32}, {32, 128}, {3, 24, 40}}) {
    const torch::Tensor g = torch::randn(shape);
    const torch::Tensor x = newton_schulz_orthogonalize(g, 5);
    ASSERT_EQ(x.sizes(), g.sizes());
    const torch::Tensor s = torch::linalg_svdvals(x);
    // The quintic does not converge to 1; it lands every singular value in about [0.7, 1.2] (for
    // matrices that are not square: a random square one has singular values too near 0 for 5 steps).
    EXPECT_GT(s.min().item<double>(), 0.55) << shape;
    EXPECT_LT(s.max().item<double>(), 1.25) << shape;
    const auto [u, unused, vh] = torch::linalg_svd(g, /*full_matrices=*/false);
    const torch::Tensor polar = torch::matmul(u, vh);
    EXPECT_LT(((x - polar).norm() / polar.norm()).item<double>(), 0.3) << shape;
    // The input's singular values spread over an order of magnitude; one iteration is far from done.
    const torch::Tensor s1 = torch::linalg_svdvals(newton_schulz_orthogonalize(g, 1));
    EXPECT_LT(s1.min().item<double>(), 0.5) << shape;
  }
}

TEST(MuonSplit, BlocksMatricesToMuonEverythingElseToAdamW) {
  Gpt model = tiny_model(1);
  const MuonSplit split = split_for_muon(model);
  // Per block: c_attn (q, k, v as three blocks), attn.c_proj, mlp.c_fc, mlp.c_proj.
  ASSERT_EQ(split.muon.size(), 4u * 2);
  int64_t fused_qkv = 0, counted = 0;
  for (const MuonMatrix& m : split.muon) {
    EXPECT_EQ(m.param.dim(), 2);
    if (m.row_blocks == 3) ++fused_qkv;
    counted += m.param.numel();
  }
  EXPECT_EQ(fused_qkv, 2);
  // wte (also the head) and wpe are AdamW's decayed matrices; biases and gains its undecayed ones.
  ASSERT_EQ(split.adamw_decay.size(), 2u);
  EXPECT_TRUE(split.adamw_decay[0].is_same(model->wte->weight));
  EXPECT_TRUE(split.adamw_decay[1].is_same(model->wpe->weight));
  for (const auto& p : split.adamw_decay) counted += p.numel();
  for (const auto& p : split.adamw_no_decay) {
    EXPECT_EQ(p.dim(), 1);
    counted += p.numel();
  }
  EXPECT_EQ(counted, model->num_parameters());
}

TEST(Muon, NonFiniteStepChangesNeitherWeightsNorMomentum) {
  Gpt model = tiny_model(2);
  LocalCommunicator comm;
  Muon muon(split_for_muon(model).muon, MuonOptions{0.05, 0.95, true, 5, 0.1}, comm);
  const torch::Tensor before = muon.parameters()[0].detach().clone();
  for (auto& p : muon.parameters()) p.mutable_grad() = torch::full_like(p, std::nan(""));
  muon.step(torch::ones({}));
  EXPECT_TRUE(torch::equal(muon.parameters()[0], before));
  for (const auto& [name, m] : muon.state_dict()) EXPECT_EQ(m.abs().sum().item<double>(), 0.0) << name;
  // The same call with found_inf 0 and finite gradients does move them.
  for (auto& p : muon.parameters()) p.mutable_grad() = torch::ones_like(p);
  muon.step(torch::zeros({}));
  EXPECT_FALSE(torch::equal(muon.parameters()[0], before));
}

// One rank of a world of three whose collectives do nothing: what this rank computes by itself.
class SilentRankOfThree final : public Communicator {
 public:
  explicit SilentRankOfThree(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return 3; }
  std::string backend_name() const override { return "silent"; }
  void all_reduce(torch::Tensor&, ReduceOp) override {}
  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor, ReduceOp) override {
    throw std::logic_error("not used");
  }
  void broadcast(torch::Tensor&, int) override {}
  void barrier() override {}
  using Communicator::all_reduce;
  using Communicator::broadcast;

 private:
  int rank_;
};

TEST(Muon, EachRankOrthogonalizesOnlyItsShareAndTheSharesAreBalanced) {
  std::vector<int64_t> numel_per_rank(3, 0);
  std::vector<int> owners_seen(8, 0);
  for (int rank = 0; rank < 3; ++rank) {
    Gpt model = tiny_model(4);
    SilentRankOfThree comm(rank);
    Muon muon(split_for_muon(model).muon, MuonOptions{0.05, 0.95, true, 5, 0.0}, comm);
    const auto params = muon.parameters();
    ASSERT_EQ(params.size(), owners_seen.size());
    std::vector<torch::Tensor> before;
    for (auto& p : params) {
      before.push_back(p.detach().clone());
      p.mutable_grad() = torch::randn_like(p);
    }
    muon.step();
    // Without the exchange a rank has moved exactly the matrices it orthogonalized.
    for (size_t i = 0; i < params.size(); ++i) {
      const bool mine = muon.owner_of(i) == rank;
      EXPECT_EQ(!torch::equal(params[i], before[i]), mine) << "matrix " << i << " on rank " << rank;
      if (mine) {
        ++owners_seen[i];
        numel_per_rank[rank] += params[i].numel();
      }
    }
  }
  for (size_t i = 0; i < owners_seen.size(); ++i) EXPECT_EQ(owners_seen[i], 1) << "matrix " << i;
  // Largest first, round robin: no rank has more than one largest matrix beyond another's share.
  const auto [lo, hi] = std::minmax_element(numel_per_rank.begin(), numel_per_rank.end());
  EXPECT_LE(*hi - *lo, 128 * 32);
  EXPECT_GT(*lo, 0);
}

TEST(MuonFlags, ComeFromTheTableAndAreRefusedWithoutMuon) {
  auto resolve = [](const std::vector<std::string>& args) {
    const Parsed<TrainFlags> parsed = train_flag_table().parse(args);
    return resolve_train_options(parsed, parsed.config.model.resolve(65), torch::kCPU, 1);
  };
  EXPECT_EQ(resolve({}).optimizer, OptimizerKind::adamw);
  const TrainOptions muon = resolve({"--optimizer", "muon", "--muon-ns-steps", "3", "--muon-nesterov", "false"});
  EXPECT_EQ(muon.optimizer, OptimizerKind::muon);
  EXPECT_EQ(muon.muon_ns_steps, 3);
  EXPECT_FALSE(muon.muon_nesterov);
  EXPECT_DOUBLE_EQ(muon.muon_lr, 0.02);
  EXPECT_DOUBLE_EQ(muon.muon_momentum, 0.95);
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--muon-lr", "0.05"}, "--muon-lr has no effect without --optimizer muon"},
      {{"--optimizer", "adamw", "--muon-momentum", "0.9"}, "--muon-momentum has no effect"},
      {{"--optimizer", "sgd"}, "--optimizer"},
      {{"--optimizer", "muon", "--muon-ns-steps", "0"}, "--muon-ns-steps"},
      {{"--optimizer", "muon", "--muon-momentum", "1"}, "--muon-momentum"}};
  for (const auto& [args, message] : refused) {
    EXPECT_NE(testing::invalid_argument_message([&] { resolve(args); }).find(message), std::string::npos)
        << args[0] << " " << args[1];
  }
}

struct RecipeUnderTest {
  MuonOptions muon;
  AdamWOptions adamw;
  int64_t steps;
};

// Trains the tiny model `steps` steps with our Muon + AdamW and records what a replay needs: the
// options, the initial parameters, each step's gradients and the parameters after it.
c10::Dict<std::string, torch::Tensor> record_training(const RecipeUnderTest& r) {
  Gpt model = tiny_model(5);
  MuonSplit split = split_for_muon(model);
  std::map<std::string, std::vector<torch::Tensor>> groups{
      {"muon", {}}, {"decay", split.adamw_decay}, {"no_decay", split.adamw_no_decay}};
  std::vector<double> blocks;
  for (const MuonMatrix& m : split.muon) {
    groups["muon"].push_back(m.param);
    blocks.push_back(static_cast<double>(m.row_blocks));
  }
  c10::Dict<std::string, torch::Tensor> record;
  auto add_all = [&](const std::string& prefix, bool grads) {
    for (const auto& [group, params] : groups) {
      for (size_t i = 0; i < params.size(); ++i) {
        const torch::Tensor t = grads ? params[i].grad() : params[i];
        record.insert(prefix + group + "." + std::to_string(i), t.detach().clone());
      }
    }
  };
  add_all("", false);
  record.insert("muon_blocks", torch::tensor(blocks, torch::kDouble));
  record.insert("options", torch::tensor({r.muon.lr, r.muon.momentum, r.muon.nesterov ? 1.0 : 0.0,
                                          static_cast<double>(r.muon.ns_steps), r.muon.weight_decay, r.adamw.lr,
                                          r.adamw.beta1, r.adamw.beta2, r.adamw.eps, r.adamw.weight_decay,
                                          static_cast<double>(r.steps)},
                                         torch::kDouble));
  LocalCommunicator comm;
  AdamW adamw(split.adamw_decay, split.adamw_no_decay, r.adamw);
  Muon muon(split.muon, r.muon, comm);
  for (int64_t s = 0; s < r.steps; ++s) {
    adamw.zero_grad();
    for (auto& p : muon.parameters()) p.mutable_grad() = torch::Tensor();
    model->loss(random_tokens(10 + s), random_tokens(100 + s)).backward();
    add_all("grad." + std::to_string(s) + ".", true);
    adamw.step();
    muon.step();
    add_all("after." + std::to_string(s) + ".", false);
  }
  return record;
}

void expect_matches_reference(const RecipeUnderTest& r) {
  if (!testing::python_imports("torch")) {
    GTEST_SKIP() << "torch is not importable by '" << testing::reference_python() << "'";
  }
  ScratchDir dir;
  const auto path = dir.path() / "record.safetensors";
  const std::vector<char> bytes = torch::pickle_save(record_training(r));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const nlohmann::json result = testing::run_python_json(MYGPT_MUON_REFERENCE_SCRIPT, {path.string()}, dir.path());
  ASSERT_FALSE(result.is_null());
  const auto diffs = result["max_diff"].get<std::vector<double>>();
  const auto changes = result["max_change"].get<std::vector<double>>();
  ASSERT_EQ(diffs.size(), static_cast<size_t>(r.steps));
  for (int64_t s = 0; s < r.steps; ++s) {
    EXPECT_LT(diffs[s], 2e-6) << "step " << s;
    // The weights moved far more than the tolerance: the comparison could fail.
    EXPECT_GT(changes[s], 1e-3) << "step " << s;
  }
}

TEST(MuonReference, OneStepEqualsPyTorch) {
  expect_matches_reference({MuonOptions{0.05, 0.95, true, 5, 0.1}, AdamWOptions{1e-2, 0.9, 0.95, 1e-8, 0.1}, 1});
}

TEST(MuonReference, SeveralNesterovStepsWithWeightDecayEqualPyTorch) {
  expect_matches_reference({MuonOptions{0.05, 0.9, true, 5, 0.1}, AdamWOptions{1e-2, 0.9, 0.95, 1e-8, 0.1}, 5});
}

TEST(MuonReference, SeveralPlainMomentumStepsWithThreeIterationsEqualPyTorch) {
  expect_matches_reference({MuonOptions{0.02, 0.95, false, 3, 0.0}, AdamWOptions{3e-3, 0.8, 0.99, 1e-8, 0.0}, 4});
}

}  // namespace
}  // namespace mygpt::muon_test
