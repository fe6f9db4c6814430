// Checkpoints (trainer/checkpoint.h) from their metadata to a built model. The input is the metadata
// ("key=value" entries separated by NUL bytes) of a file whose tensors are those of one fixed tiny model,
// with every checksum made valid, so each mutation is a consistent lie about the tensors. Loading must
// refuse it (std::invalid_argument) or describe exactly the model the tensors hold; a model is built only
// then, so a claim can never make the program allocate more than the file holds (-rss_limit_mb would
// report it, and a differing parameter count traps).
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/checksum.h"
#include "model/hf/safetensors_file.h"
#include "tests/fuzz/fuzz_input_file.h"
#include "trainer/checkpoint.h"

namespace {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The seed's model_config (scripts/fuzz.sh writes the same): 1 layer, width 8, vocabulary 16, block 8.
mygpt::GptConfig tensors_config() {
  mygpt::GptConfig c;
  c.vocab_size = 16;
  c.block_size = 8;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 8;
  c.dropout = 0.0;
  c.bias = true;
  return c;
}

const NamedTensors& fixed_tensors() {
  static const NamedTensors tensors = [] {
    torch::manual_seed(0);
    mygpt::Gpt model(tensors_config());
    NamedTensors out;
    for (const auto& p : model->named_parameters()) out.emplace_back("model." + p.key(), p.value().detach().clone());
    out.emplace_back("optimizer.steps_taken", torch::tensor({int64_t{1}}, torch::kLong));
    return out;
  }();
  return tensors;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> metadata;
  for (size_t start = 0; start <= input.size();) {
    const size_t end = std::min(input.find('\0', start), input.size());
    const std::string_view entry = input.substr(start, end - start);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos) metadata[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
    start = end + 1;
  }
  // Valid checksums, as trainer/checkpoint.cpp computes them: the lie is in the claims, not in damage.
  for (const auto& [name, tensor] : fixed_tensors()) {
    metadata["checksum." + name] = mygpt::hex64(mygpt::xxh64(tensor.data_ptr(), tensor.nbytes()));
  }
  metadata.erase("metadata_checksum");
  std::string all;
  for (const auto& [key, value] : metadata) all += key + "=" + value + '\0';
  metadata["metadata_checksum"] = mygpt::hex64(mygpt::xxh64(all));

  const auto path = mygpt::fuzz::scratch_folder() / "ckpt_00000001.safetensors";
  try {
    mygpt::write_safetensors(path, fixed_tensors(), metadata);
  } catch (const std::invalid_argument&) {
    return 0;  // metadata safetensors cannot hold (not UTF-8)
  }
  try {
    const mygpt::Checkpoint checkpoint = mygpt::load_checkpoint(path);
    if (mygpt::count_parameters(checkpoint.meta.model_config).total() !=
        mygpt::count_parameters(tensors_config()).total()) {
      __builtin_trap();  // believed a model the tensors are not
    }
    const mygpt::Gpt model = mygpt::model_from_checkpoint(checkpoint);
    if (model->num_parameters() != mygpt::count_parameters(tensors_config()).total()) __builtin_trap();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
