// `mygpt-ddp generate`: samples from a checkpoint or a Hugging Face GPT-2 folder. Same seed and device
// give the same text.
#include <iostream>
#include <optional>
#include <stdexcept>

#include "common/file_io.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/inference_model.h"
#include "launcher/shared_flags.h"
#include "model/sampling.h"

namespace mygpt {
namespace {

struct GenerateFlags {
  std::optional<std::string> checkpoint;
  std::string prompt;
  int64_t max_new_tokens{};
  double temperature{};
  int64_t top_k{};
  int64_t num_samples{};
  uint64_t seed{};
  std::string device;
  std::optional<std::string> vocab;
};

const OptionTable<GenerateFlags>& generate_flag_table() {
  static const OptionTable<GenerateFlags> table = [] {
    using G = GenerateFlags;
    OptionTable<G> t;
    t.group("Sampling");
    model_flag(t, &G::checkpoint);
    t.add("prompt", &G::prompt, "text the samples continue").init("\n").check(not_empty).check(utf8_text);
    t.add("max-new-tokens", &G::max_new_tokens, "tokens to generate per sample").init(200).check(non_negative);
    t.add("temperature", &G::temperature, "softmax temperature; 0 is greedy").init(0.8).check(non_negative);
    t.add("top-k", &G::top_k, "sample among the k most likely tokens; 0 keeps all").init(0).check(non_negative);
    t.add("num-samples", &G::num_samples, "independent samples").init(1).check(positive);
    seed_flag(t, &G::seed);
    device_flag(t, &G::device);
    vocab_flag(t, &G::vocab);
    return t;
  }();
  return table;
}

int run_generate(const Parsed<GenerateFlags>& flags, const JobSession&) {
  const GenerateFlags& f = flags.config;
  if (f.temperature == 0 && flags.gave("top-k")) {
    throw std::invalid_argument("--top-k has no effect with --temperature 0 (greedy decoding)");
  }
  const torch::Device device = pick_device(f.device);
  std::cout << "device: " << device_name(device) << std::endl;
  InferenceModel m = load_inference_model(*f.checkpoint, device, f.vocab.value_or(""));
  std::cout << "model: " << m.description << std::endl;
  const SamplingOptions sampling{f.max_new_tokens, f.temperature, f.top_k, /*vocab_limit=*/m.token_count};
  const std::vector<int64_t> prompt_ids = m.codec->encode(f.prompt);

  seed_everything(f.seed);
  auto prompt_tensor = torch::tensor(prompt_ids, torch::kLong).unsqueeze(0).to(device);
  for (int64_t i = 0; i < f.num_samples; ++i) {
    auto out = generate(m.model, prompt_tensor, sampling).squeeze(0).to(torch::kCPU);
    std::vector<int64_t> ids(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel());
    if (f.num_samples > 1) std::cout << "--- sample " << i + 1 << " ---\n";
    // GPT-2's tokens are bytes: a sample may cut a character or hold bytes that are no UTF-8 at all.
    std::cout << with_invalid_utf8_replaced(m.codec->decode(ids)) << std::endl;
  }
  return 0;
}

}  // namespace

Command generate_command() {
  return make_command<GenerateFlags>("generate", "generate --checkpoint PATH [options]",
                                     "sample text from a trained model", /*multi_rank=*/false, &generate_flag_table,
                                     &run_generate);
}

}  // namespace mygpt
