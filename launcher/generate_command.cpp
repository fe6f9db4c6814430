// `mygpt-ddp generate`: samples from a checkpoint. Same seed and device give the same text.
#include <iostream>
#include <stdexcept>

#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/inference_model.h"
#include "model/sampling.h"

namespace mygpt {

int run_generate(const po::variables_map& v) {
  const torch::Device device = pick_device(v["device"].as<std::string>());
  std::cout << "device: " << device_name(device) << std::endl;
  SamplingOptions sampling;
  sampling.max_new_tokens = non_negative(v, "max-new-tokens");
  sampling.temperature = v["temperature"].as<double>();
  sampling.top_k = non_negative(v, "top-k");
  if (sampling.temperature < 0) throw std::invalid_argument("--temperature must not be negative");
  const int64_t num_samples = positive(v, "num-samples");

  InferenceModel m = load_inference_model(v["checkpoint"].as<std::string>(), device,
                                          v.count("vocab") ? v["vocab"].as<std::string>() : "");
  const std::string prompt = v["prompt"].as<std::string>();
  if (prompt.empty()) throw std::invalid_argument("--prompt must not be empty");
  const std::vector<int64_t> prompt_ids = m.codec->encode(prompt);

  seed_everything(v["seed"].as<uint64_t>());
  auto prompt_tensor = torch::tensor(prompt_ids, torch::kLong).unsqueeze(0).to(device);
  for (int64_t i = 0; i < num_samples; ++i) {
    auto out = generate(m.model, prompt_tensor, sampling).squeeze(0).to(torch::kCPU);
    std::vector<int64_t> ids(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel());
    if (num_samples > 1) std::cout << "--- sample " << i + 1 << " ---\n";
    std::cout << m.codec->decode(ids) << std::endl;
  }
  return 0;
}

}  // namespace mygpt
