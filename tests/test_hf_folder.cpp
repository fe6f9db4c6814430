// model/hf/hf_folder (the one reader of Hugging Face folders) and WeightInit::for_loading: a loaded model's
// parameters are the file's tensors bit for bit, its construction drew nothing from the random generator,
// the load goes straight into huge-page memory when asked, and each new refusal is one line naming the file.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "common/file_io.h"
#include "expect_refused.h"
#include "launcher/inference_model.h"
#include "model/gpt.h"
#include "model/hf/hf_folder.h"
#include "model/hf/hf_gpt2.h"
#include "model/huge_page_weights.h"
#include "model/hf/safetensors_file.h"
#include "scratch_dir.h"

namespace mygpt::hf_folder_test {
namespace {
namespace fs = std::filesystem;

GptConfig small_gpt2(int64_t vocab_size) {
  GptConfig config = preset_config("tiny");
  config.vocab_size = vocab_size;
  config.block_size = 32;
  return config;
}

torch::Tensor generator_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

// A folder exported from a randomly initialized model of `vocab_size` tokens (vocabulary padded to 64).
fs::path exported_folder(const ScratchDir& dir, int64_t vocab_size = 100) {
  torch::manual_seed(11);
  Gpt model(small_gpt2(padded_vocab_size(vocab_size, 64)));
  const fs::path folder = dir.path() / "hf";
  export_hf_gpt2(model, vocab_size, folder);
  return folder;
}

void rewrite_weights(const fs::path& folder, const std::function<void(std::vector<std::pair<std::string, torch::Tensor>>&)>& edit) {
  const auto reader = SafetensorsReader::open(folder / "model.safetensors");
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& name : reader.names()) tensors.emplace_back(name, reader.tensor(name));
  edit(tensors);
  write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}});
}

TEST(WeightInit, BuildingForLoadingDrawsNothingAndRandomInitIsUnchanged) {
  const GptConfig config = small_gpt2(128);
  torch::manual_seed(5);
  const torch::Tensor before = generator_state();
  Gpt for_loading(config, WeightInit::for_loading);
  EXPECT_TRUE(torch::equal(before, generator_state())) << "for_loading drew from the default generator";
  EXPECT_EQ(for_loading->weight_init(), WeightInit::for_loading);
  // Same shapes as a randomly initialized model, parameter for parameter.
  torch::manual_seed(5);
  Gpt random(config);
  EXPECT_EQ(random->weight_init(), WeightInit::random);
  EXPECT_FALSE(torch::equal(before, generator_state()));
  const auto a = for_loading->named_parameters(), b = random->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& item : b) {
    ASSERT_NE(a.find(item.key()), nullptr) << item.key();
    EXPECT_EQ(a[item.key()].sizes(), item.value().sizes()) << item.key();
  }
}

// --zero 3's start (trainer/fully_sharded_model.h): a model built unallocated holds no parameter memory and
// draws nothing; its initial values, drawn one parameter at a time, are a random model's bit for bit, and
// leave the generator where building the random model leaves it. For both inits (gpt2 and nanochat), with a
// tied and an untied head and biases.
TEST(WeightInit, UnallocatedModelDrawsTheRandomModelsValuesOneAtATime) {
  for (const InitKind init : {InitKind::gpt2, InitKind::nanochat}) {
    for (const bool tie : {true, false}) {
      GptConfig config = small_gpt2(128);
      config.init = init;
      config.tie_head = tie;
      config.bias = true;
      const std::string what = std::string(init == InitKind::gpt2 ? "gpt2" : "nanochat") + (tie ? ", tied" : ", untied");
      torch::manual_seed(5);
      Gpt random(config);
      const torch::Tensor after_random = generator_state();
      torch::manual_seed(5);
      Gpt unallocated(config, WeightInit::unallocated);
      EXPECT_EQ(unallocated->weight_init(), WeightInit::unallocated);
      for (const auto& p : unallocated->parameters()) {
        if (p.dim() >= 2) {
          EXPECT_EQ(p.storage().nbytes(), 0u) << what << ": a matrix was given memory";
        }
      }
      const auto expected = random->named_parameters();
      size_t seen = 0;
      unallocated->for_each_initial_value([&](const std::string& name, const torch::Tensor& value) {
        ASSERT_NE(expected.find(name), nullptr) << what << ": " << name;
        EXPECT_TRUE(torch::equal(value, expected[name])) << what << ": " << name;
        ++seen;
      });
      EXPECT_EQ(seen, expected.size()) << what;
      EXPECT_TRUE(torch::equal(after_random, generator_state())) << what << ": the generator ends elsewhere";
    }
  }
}

TEST(HfFolder, LoadGivesTheFileTensorsBitForBitWithoutDrawing) {
  ScratchDir dir;
  const fs::path folder = exported_folder(dir);
  const HfFolder opened = open_hf_folder(folder, /*vocab_multiple=*/64);
  torch::manual_seed(3);
  const torch::Tensor before = generator_state();
  Gpt model = load_hf_folder(opened);
  EXPECT_TRUE(torch::equal(before, generator_state())) << "loading drew from the default generator";
  EXPECT_EQ(model->weight_init(), WeightInit::for_loading);

  const auto reader = SafetensorsReader::open(folder / "model.safetensors");
  const auto parameters = model->named_parameters();
  size_t compared = 0;
  for (const auto& name : reader.names()) {
    const std::string ours = name.substr(std::string("transformer.").size());
    torch::Tensor expected = reader.tensor(name);
    if (ours.find("c_") != std::string::npos && ours.ends_with(".weight")) expected = expected.t();  // Conv1D
    torch::Tensor actual = parameters[ours];
    if (ours == "wte.weight") {
      EXPECT_TRUE(torch::equal(actual.narrow(0, 100, 28), torch::zeros({28, actual.size(1)}))) << "padded rows";
      actual = actual.narrow(0, 0, 100);
    }
    EXPECT_TRUE(torch::equal(actual, expected)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, parameters.size());
}

TEST(HfFolder, StoredModelLoadsOnceIntoHugePagesAndCopiesIntoAPaddedModel) {
  ScratchDir dir;
  const fs::path folder = exported_folder(dir);
  const StoredModel stored = open_stored_model(folder);
  ASSERT_TRUE(stored.hf_folder.has_value());
  Gpt direct = load_stored_weights(stored, /*huge_pages=*/true);
  const std::string again = move_weights_to_huge_pages(*direct);
#ifdef __linux__
  EXPECT_NE(again.find("loaded there"), std::string::npos) << again;
#endif
  Gpt plain = load_stored_weights(stored);
  // --init-from's path: into a training model padded to 128 rows, the padding zero.
  torch::manual_seed(1);
  Gpt padded(small_gpt2(128));
  copy_stored_weights(stored, padded);
  const auto a = direct->named_parameters(), b = plain->named_parameters(), c = padded->named_parameters();
  for (const auto& item : b) {
    EXPECT_TRUE(torch::equal(a[item.key()], item.value())) << item.key();
    const torch::Tensor in_padded = c[item.key()];
    if (item.key() == "wte.weight") {
      EXPECT_TRUE(torch::equal(in_padded.narrow(0, 0, 100), item.value())) << item.key();
      EXPECT_EQ(in_padded.narrow(0, 100, 28).abs().sum().item<float>(), 0.0f);
    } else {
      EXPECT_TRUE(torch::equal(in_padded, item.value())) << item.key();
    }
  }
}

TEST(HfFolder, BadFoldersAreOneLineNamingTheFile) {
  ScratchDir dir;
  const fs::path folder = exported_folder(dir);
  const std::string weights = (folder / "model.safetensors").string();
  // A NaN found by the load's one pass over the parameter.
  rewrite_weights(folder, [](auto& tensors) { tensors[0].second.view(-1)[0] = std::nanf(""); });
  const HfFolder with_nan = open_hf_folder(folder);  // headers are fine
  expect_refused([&] { load_hf_folder(with_nan); }, {weights, "holds NaN or infinite values"});
  // A shape config.json does not make.
  fs::remove_all(folder);
  exported_folder(dir);
  rewrite_weights(folder, [](auto& tensors) {
    for (auto& [name, t] : tensors) {
      if (name == "transformer.wpe.weight") t = t.narrow(0, 0, 16).clone();
    }
  });
  expect_refused([&] { open_hf_folder(folder); }, {weights, "transformer.wpe.weight", "expected [32, 32] from config.json"});
  // A tensor no GPT-2 has: config.json and the weights disagree.
  fs::remove_all(folder);
  exported_folder(dir);
  rewrite_weights(folder, [](auto& tensors) { tensors.emplace_back("transformer.h.9.ln_1.weight", torch::ones({32})); });
  expect_refused([&] { open_hf_folder(folder); }, {weights, "h.9.ln_1.weight", "config.json disagrees with the weights"});
  // A missing tensor.
  fs::remove_all(folder);
  exported_folder(dir);
  rewrite_weights(folder, [](auto& tensors) {
    std::erase_if(tensors, [](const auto& item) { return item.first == "transformer.ln_f.bias"; });
  });
  expect_refused([&] { open_hf_folder(folder); }, {folder.string(), "lacks tensor 'transformer.ln_f.bias'"});
}

}  // namespace
}  // namespace mygpt::hf_folder_test
