// `mygpt-ddp generate`: samples from a checkpoint or a Hugging Face GPT-2 folder. Same seed and device
// give the same text. Samples are drawn several at a time by the inference engine (inference/engine.h:
// one forward pass per token for the batch, each sample with its KV cache); the first of each batch is
// printed token by token as it is produced.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/strprintf.h"
#include "common/utf8_stream.h"

#include "common/file_io.h"
#include "dataloader/chat_format.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/inference_model.h"
#include "launcher/shared_flags.h"
#include "inference/engine.h"
#include "model/huge_page_weights.h"
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
  int64_t threads{};
  bool kv_cache{};
  bool print_ids{};
  bool timing{};
};

// Rows sampled together: enough to share each weight read among them, few enough that their KV caches
// (75 MB per row for GPT-2 124M at 1024 positions) stay small.
constexpr int64_t kMaxSamplesPerBatch = 8;

const OptionTable<GenerateFlags>& generate_flag_table() {
  static const OptionTable<GenerateFlags> table = [] {
    using G = GenerateFlags;
    OptionTable<G> t;
    t.group("Sampling");
    model_flag(t, &G::checkpoint);
    t.add("prompt", &G::prompt, "text the samples continue").init("\n").check(not_empty).check(utf8_text);
    t.add("max-new-tokens", &G::max_new_tokens, "tokens to generate per sample").init(200).check(non_negative);
    temperature_flag(t, &G::temperature).init(0.8);
    top_k_flag(t, &G::top_k).init(0);
    t.add("num-samples", &G::num_samples, "independent samples").init(1).check(positive);
    seed_flag(t, &G::seed);
    device_flag(t, &G::device);
    vocab_flag(t, &G::vocab);
    threads_flag(t, &G::threads);
    t.add("kv-cache", &G::kv_cache,
          "keep the context's attention keys and values (one new position per token); false re-reads the whole "
          "context for every token")
        .init(true);
    t.add("print-ids", &G::print_ids, "print each sample's token ids (prompt included) instead of its text")
        .init(false);
    t.add("timing", &G::timing, "after each batch of samples, its generation speed on stderr (tokens/s)").init(false);
    return t;
  }();
  return table;
}

void print_ids(const std::vector<int64_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << std::endl;
}

int run_generate(const Parsed<GenerateFlags>& flags, const JobSession&) {
  const GenerateFlags& f = flags.config;
  refuse_top_k_when_greedy(flags, f.temperature, f.top_k);
  const torch::Device device = pick_device(f.device);
  const int64_t threads = set_cpu_threads(f.threads);
  std::cout << "device: " << device_name(device) << std::endl;
  if (device.is_cpu()) std::cout << "threads: " << threads << std::endl;
  InferenceModel m = load_inference_model(*f.checkpoint, device, f.vocab.value_or(""));
  std::cout << "model: " << m.description << std::endl;
  if (device.is_cpu()) {
    // Each new token reads every weight once: from huge pages that is fewer TLB misses (model/huge_page_weights.h).
    const std::string placed = move_weights_to_huge_pages(*m.model);
    if (f.timing) std::cerr << "weights: " << placed << std::endl;
  }
  SamplingOptions sampling{f.max_new_tokens, f.temperature, f.top_k, /*vocab_limit=*/m.token_count};
  sampling.kv_cache = f.kv_cache;
  const std::vector<int64_t> prompt_ids = encode_given_text(*m.codec, f.prompt, "--prompt");
  // A chat model's chat tokens are printed as their names (its tokenizer may not know them: GPT-2's).
  std::optional<ChatFormat> chat;
  if (m.chat_record) chat.emplace(*m.codec, m.model->config().vocab_size);
  auto decode = [&](const std::vector<int64_t>& ids) { return chat ? chat->decode(ids) : m.codec->decode(ids); };

  seed_everything(f.seed);
  Engine engine(m.model, f.kv_cache);
  // Past the model's context the window slides (the last block re-read), as a sample may run that long.
  const SequenceSettings settings{.sampling = sampling, .slide_past_context = true};
  for (int64_t first = 0; first < f.num_samples; first += kMaxSamplesPerBatch) {
    const int64_t rows = std::min(kMaxSamplesPerBatch, f.num_samples - first);
    auto header = [&](int64_t sample) {
      if (f.num_samples > 1 && !f.print_ids) std::cout << "--- sample " << sample + 1 << " ---\n";
    };
    std::vector<Sequence> samples;
    samples.reserve(static_cast<size_t>(rows));
    std::vector<Sequence*> batch;
    for (int64_t r = 0; r < rows; ++r) {
      samples.emplace_back(m.model, settings);
      samples.back().start_reply(prompt_ids);
      batch.push_back(&samples.back());
    }
    // The batch's first sample is streamed: its text as it grows, whole characters only.
    Utf8StreamDecoder stream;
    if (!f.print_ids) {
      header(first);
      std::cout << stream.push(decode(prompt_ids)) << std::flush;
    }
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();  // this process's CPU time: steadier on a shared machine
    auto unfinished = [&] {
      return std::any_of(samples.begin(), samples.end(), [](const Sequence& s) { return !s.finished(); });
    };
    while (unfinished()) {
      const size_t shown = samples.front().reply().size();
      engine.step(batch);
      for (const Sequence& s : samples) {
        if (s.finish_reason() == FinishReason::non_finite_logits) {  // the stored weights are the problem: bad input
          if (!f.print_ids) std::cout << std::endl;
          throw std::invalid_argument(m.description + ": " + NonFiniteLogits().what());
        }
      }
      if (!f.print_ids && samples.front().reply().size() > shown) {
        std::cout << stream.push(decode({samples.front().reply().back()}));
        check_standard_output();  // a full disk stops the run at once
      }
    }
    if (f.timing) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
      const auto tokens = static_cast<double>(f.max_new_tokens);
      std::cerr << strprintf("timing: %lld prompt + %lld new tokens x %lld sample(s) in %.3f s, %.3f s of CPU: %.2f new "
                             "tokens/s per sample, %.2f per CPU second (prompt read and printing included)",
                             static_cast<long long>(prompt_ids.size()), static_cast<long long>(f.max_new_tokens),
                             static_cast<long long>(rows), seconds, cpu_seconds, tokens / seconds, tokens / cpu_seconds)
                << std::endl;
    }
    auto sample_ids = [&](const Sequence& s) {
      std::vector<int64_t> ids = prompt_ids;
      ids.insert(ids.end(), s.reply().begin(), s.reply().end());
      return ids;
    };
    if (f.print_ids) {
      for (const Sequence& s : samples) print_ids(sample_ids(s));
      continue;
    }
    std::cout << stream.finish() << std::endl;
    for (int64_t r = 1; r < rows; ++r) {
      header(first + r);
      std::cout << with_invalid_utf8_replaced(decode(sample_ids(samples[static_cast<size_t>(r)]))) << std::endl;
    }
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
