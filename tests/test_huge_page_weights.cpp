// model/huge_page_weights: the model computes the same after its weights move, the copies sit aligned
// in one mapping, and (on Linux with transparent huge pages) that mapping carries the huge-page advice.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model/gpt.h"
#include "model/huge_page_weights.h"

namespace mygpt::huge_page_weights_test {
namespace {

Gpt small_model() {
  GptConfig config = preset_config("tiny");
  config.vocab_size = 101;
  config.block_size = 32;
  torch::manual_seed(7);
  Gpt model(config);
  model->eval();
  return model;
}

#ifdef __linux__
// The VmFlags line of the /proc/self/smaps entry whose address range holds `address`.
std::string vm_flags_of(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t from = 0, to = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> from >> dash >> to && dash == '-') {
      inside = from <= at && at < to;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}
#endif

TEST(HugePageWeights, TheModelComputesTheSameFromTheCopies) {
  auto model = small_model();
  torch::NoGradGuard no_grad;
  const auto idx = torch::randint(0, 101, {2, 9});
  const auto before = model->forward(idx);
  std::vector<torch::Tensor> values;
  for (const auto& p : model->parameters()) values.push_back(p.clone());
  std::vector<const void*> old_pointers;
  for (const auto& p : model->parameters()) old_pointers.push_back(p.data_ptr());

  const std::string line = move_weights_to_huge_pages(*model);
  std::cout << "move_weights_to_huge_pages: " << line << "\n";
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(params[i], values[i])) << "parameter " << i;
    EXPECT_TRUE(params[i].is_contiguous()) << "parameter " << i;
#ifdef __linux__
    EXPECT_NE(params[i].data_ptr(), old_pointers[i]) << "parameter " << i << " was not moved";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(params[i].data_ptr()) % 64, 0u) << "parameter " << i;
#endif
  }
  EXPECT_TRUE(torch::equal(model->forward(idx), before));
}

TEST(HugePageWeights, TheCopiesAreAdvisedForHugePages) {
#ifndef __linux__
  GTEST_SKIP() << "huge pages are asked for on Linux only";
#else
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage absent)";
  }
  auto model = small_model();
  const std::string line = move_weights_to_huge_pages(*model);
  ASSERT_EQ(line.find("refused"), std::string::npos) << line;
  const auto flags = vm_flags_of(model->wte->weight.data_ptr());
  ASSERT_FALSE(flags.empty()) << "no /proc/self/smaps entry holds the weights";
  // "hg": the mapping was given MADV_HUGEPAGE (proc(5)).
  EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
#endif
}

}  // namespace
}  // namespace mygpt::huge_page_weights_test
