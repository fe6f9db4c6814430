// `mygpt-ddp eval`: the evaluations of training, run on a checkpoint by themselves: validation loss on
// token data, HellaSwag accuracy, or held-out accuracy on a built-in task.
#include <iostream>
#include <memory>
#include <stdexcept>

#include "dataloader/batch_loader.h"
#include "dataloader/builtin_dataset.h"
#include "dataloader/hellaswag_reader.h"
#include "dataloader/token_stream.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/inference_model.h"
#include "model/sampling.h"
#include "trainer/hellaswag_eval.h"
#include "trainer/mixed_precision.h"
#include "trainer/run_output.h"

namespace mygpt {
namespace {

int evaluate_val_loss(const po::variables_map& v, InferenceModel& m, const torch::Device& device, bool bf16) {
  const GptConfig& config = m.model->config();
  auto tokens = std::make_shared<TokenStream>(expand_token_paths(v["val"].as<std::string>()),
                                              static_cast<uint32_t>(config.vocab_size));
  int64_t seq_len = non_negative(v, "seq-len");
  if (seq_len == 0) seq_len = config.block_size;
  if (seq_len > config.block_size) throw std::invalid_argument("--seq-len exceeds the model's block size");
  ShardedBatchLoader loader(tokens, positive(v, "batch-size"), seq_len);
  const int64_t steps = positive(v, "eval-steps");
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (int64_t i = 0; i < steps; ++i) {
    Batch batch = loader.next(device);
    AutocastScope autocast(device, bf16);
    sum += m.model->loss(batch.x, batch.y).item<double>();
  }
  std::cout << strprintf("val loss: %.4f (%lld batches of %lld x %lld tokens)", sum / static_cast<double>(steps),
                         static_cast<long long>(steps), static_cast<long long>(v["batch-size"].as<int64_t>()),
                         static_cast<long long>(seq_len))
            << std::endl;
  return 0;
}

int evaluate_hellaswag_file(const po::variables_map& v, InferenceModel& m, const torch::Device& device, bool bf16) {
  if (m.codec->kind() != "gpt2") throw std::invalid_argument("HellaSwag needs a GPT-2-tokenizer model (give --vocab DIR)");
  const int64_t limit = non_negative(v, "examples");
  const auto examples = read_tokenized_hellaswag(v["hellaswag"].as<std::string>(), *m.codec, limit);
  LocalCommunicator single;
  const HellaSwagResult r = evaluate_hellaswag(m.model, examples, limit, single, device, bf16);
  std::cout << strprintf("hellaswag accuracy: %.4f (%lld/%lld examples, length-normalized)", r.accuracy(),
                         static_cast<long long>(r.correct), static_cast<long long>(r.total))
            << std::endl;
  return 0;
}

int evaluate_builtin_task(const po::variables_map& v, InferenceModel& m, const torch::Device& device) {
  int64_t count = non_negative(v, "examples");
  if (count == 0) count = 200;
  const auto examples = builtin_heldout_examples(v["task"].as<std::string>(), static_cast<size_t>(count));
  const int64_t show = non_negative(v, "show");
  int64_t correct = 0, shown = 0;
  SamplingOptions greedy{/*max_new_tokens=*/0, /*temperature=*/0.0, /*top_k=*/0};
  for (const TaskExample& e : examples) {
    const auto prompt_ids = m.codec->encode(e.prompt);
    greedy.max_new_tokens = static_cast<int64_t>(m.codec->encode(e.answer).size());
    auto out = generate(m.model, torch::tensor(prompt_ids, torch::kLong).unsqueeze(0).to(device), greedy);
    auto tail = out.squeeze(0).slice(0, static_cast<int64_t>(prompt_ids.size())).to(torch::kCPU);
    const std::string answer =
        m.codec->decode(std::vector<int64_t>(tail.data_ptr<int64_t>(), tail.data_ptr<int64_t>() + tail.numel()));
    const bool ok = answer == e.answer;
    correct += ok ? 1 : 0;
    if (shown++ < show) {
      std::cout << "  " << e.prompt << answer.substr(0, answer.find('\n'))
                << (ok ? "   ok" : "   WRONG (expected " + e.answer.substr(0, e.answer.find('\n')) + ")") << "\n";
    }
  }
  std::cout << strprintf("held-out accuracy: %.1f%% (%lld/%zu unseen examples)",
                         100.0 * static_cast<double>(correct) / static_cast<double>(examples.size()),
                         static_cast<long long>(correct), examples.size())
            << std::endl;
  return 0;
}

}  // namespace

int run_eval(const po::variables_map& v) {
  const int modes = static_cast<int>(v.count("val") + v.count("hellaswag") + v.count("task"));
  if (modes != 1) throw std::invalid_argument("eval needs exactly one of --val, --hellaswag or --task");
  const torch::Device device = pick_device(v["device"].as<std::string>());
  std::cout << "device: " << device_name(device) << std::endl;
  const std::string precision = v["precision"].as<std::string>();
  if (precision != "auto" && precision != "fp32" && precision != "bf16") {
    throw std::invalid_argument("--precision must be auto, fp32 or bf16");
  }
  const bool bf16 = precision == "bf16" || (precision == "auto" && device.is_cuda());
  if (v.count("val")) {
    // Token data needs no tokenizer, and a model trained on it without --vocab has none.
    LoadedCheckpoint ckpt = load_checkpoint(resolve_checkpoint(v["checkpoint"].as<std::string>()));
    InferenceModel m;
    m.meta = ckpt.meta;
    m.model = ckpt.model;
    m.model->to(device);
    m.model->eval();
    return evaluate_val_loss(v, m, device, bf16);
  }
  InferenceModel m = load_inference_model(v["checkpoint"].as<std::string>(), device,
                                          v.count("vocab") ? v["vocab"].as<std::string>() : "");
  if (v.count("hellaswag")) return evaluate_hellaswag_file(v, m, device, bf16);
  return evaluate_builtin_task(v, m, device);
}

}  // namespace mygpt
