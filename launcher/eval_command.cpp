// `mygpt-ddp eval`: held-out accuracy on a built-in task, decoding each prompt greedily.
#include <iostream>
#include <stdexcept>

#include "dataloader/builtin_dataset.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/inference_model.h"
#include "model/sampling.h"
#include "trainer/run_output.h"

namespace mygpt {

int run_eval(const po::variables_map& v) {
  const torch::Device device = pick_device(v["device"].as<std::string>());
  std::cout << "device: " << describe_device(device) << std::endl;
  InferenceModel m = load_inference_model(v["checkpoint"].as<std::string>(), device);
  const auto examples = builtin_heldout_examples(v["task"].as<std::string>(), static_cast<size_t>(positive(v, "examples")));
  const int64_t show = non_negative(v, "show");

  int64_t correct = 0, shown = 0;
  SamplingOptions greedy{/*max_new_tokens=*/0, /*temperature=*/0.0, /*top_k=*/0};
  for (const TaskExample& e : examples) {
    const auto prompt_ids = m.encode(e.prompt);
    greedy.max_new_tokens = static_cast<int64_t>(m.encode(e.answer).size());
    auto out = generate(m.model, torch::tensor(prompt_ids, torch::kLong).unsqueeze(0).to(device), greedy);
    auto tail = out.squeeze(0).slice(0, static_cast<int64_t>(prompt_ids.size())).to(torch::kCPU);
    const std::string answer = m.decode(std::vector<int64_t>(tail.data_ptr<int64_t>(), tail.data_ptr<int64_t>() + tail.numel()));
    const bool ok = answer == e.answer;
    correct += ok ? 1 : 0;
    if (shown < show) {
      std::cout << "  " << e.prompt << answer.substr(0, answer.find('\n')) << (ok ? "   ok" : "   WRONG (expected " +
                   e.answer.substr(0, e.answer.find('\n')) + ")") << "\n";
      ++shown;
    }
  }
  std::cout << strprintf("held-out accuracy: %.1f%% (%lld/%zu unseen examples)",
                         100.0 * static_cast<double>(correct) / static_cast<double>(examples.size()),
                         static_cast<long long>(correct), examples.size())
            << std::endl;
  return 0;
}

}  // namespace mygpt
