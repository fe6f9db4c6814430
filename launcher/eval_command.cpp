// `mygpt-ddp eval`: the evaluations of training, run by themselves on a checkpoint or a Hugging Face
// folder: validation loss and bits per byte on token data (or on a text, with the model's tokenizer; or,
// for a chat model, on held-out conversations as train --sft scores them), HellaSwag accuracy, nanochat's
// CORE metric, or held-out accuracy on a built-in task. Under a launcher (mpirun, torchrun, srun) the
// ranks share the batches or items and print what one process prints. The evaluations are train's own
// (eval/evaluator.h): this file reads the options, fills the evaluation plan and prints the results.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <streambuf>
#include <stdexcept>

#include "common/file_io.h"
#include "eval/core_bundle.h"
#include "distributed/job_communicators.h"
#include "common/strprintf.h"
#include "dataloader/batch_loader.h"
#include "dataloader/builtin_dataset.h"
#include "dataloader/chat_batch_loader.h"
#include "dataloader/chat_data.h"
#include "dataloader/chat_format.h"
#include "common/progress.h"
#include "eval/hellaswag_reader.h"
#include "dataloader/token_stream.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/inference_model.h"
#include "launcher/shared_flags.h"
#include "model/huge_page_weights.h"
#include "model/sampling.h"
#include "eval/evaluator.h"
#include "eval/validation_batches.h"
#include "eval/validation_data.h"
#include "model/mixed_precision.h"

namespace mygpt {
namespace {

struct EvalFlags {
  std::optional<std::string> checkpoint;
  std::optional<std::string> val, hellaswag, task, core;
  int64_t core_max_per_task{};
  std::optional<std::string> json;
  int64_t examples{};
  std::optional<int64_t> hellaswag_examples;  // train's name for --examples of HellaSwag
  double val_fraction{};
  int64_t eval_steps{};
  int64_t batch_size{};
  int64_t seq_len{};
  int64_t show{};
  Precision precision{};
  std::optional<std::string> vocab;
  std::string device;
  int64_t threads{};
  bool quiet{};
  double comm_timeout{};
  std::string rendezvous;
  bool gave_val_fraction{};  // not an option: whether --val-fraction was given
};

const OptionTable<EvalFlags>& eval_flag_table() {
  static const OptionTable<EvalFlags> table = [] {
    using E = EvalFlags;
    OptionTable<E> t;
    t.group("What to evaluate (one of --val, --hellaswag, --core, --task)");
    model_flag(t, &E::checkpoint);
    t.add("val", &E::val,
          "validation loss on token data (a file, a glob, or a shard folder: its *val* files), or on a UTF-8 text "
          "file encoded with the model's tokenizer, or (a chat model) JSON lines of held-out conversations");
    t.add("hellaswag", &E::hellaswag, "HellaSwag accuracy (official jsonl or llama.cpp's 6-line text)");
    t.add("core", &E::core,
          "nanochat's CORE metric over an unzipped eval bundle (core.yaml, eval_meta_data.csv, eval_data/)");
    t.add("core-max-per-task", &E::core_max_per_task,
          "--core items per task (nanochat's order: shuffled with seed 1337); 0 means all")
        .init(0)
        .check(non_negative);
    t.add("json", &E::json, "also write --core's results to this JSON file (written whole or not at all)");
    t.add("task", &E::task, "held-out accuracy on a built-in task such as builtin:sort (greedy decoding)");
    t.add("examples", &E::examples, "examples to score; 0 means all (builtin task: 200)").init(0).check(non_negative);
    t.add("hellaswag-examples", &E::hellaswag_examples, "--examples of --hellaswag, by train's name for it")
        .check(non_negative);
    t.add("val-fraction", &E::val_fraction,
          "share of a --val text scored: its end, which train on that text held out (1: the whole text)")
        .init(0.1)
        .check(in_range(0, 1, /*hi_inclusive=*/true));
    t.add("eval-steps", &E::eval_steps, "validation batches of --batch-size x --seq-len tokens (--val); at most what the data holds, each scored once").init(20).check(positive);
    t.add("batch-size", &E::batch_size, "validation batch rows (--val)").init(8).check(positive);
    t.add("seq-len", &E::seq_len, "validation row length; 0 means the block size (--val)").init(0).check(non_negative);
    t.add("show", &E::show, "builtin task examples to print").init(5).check(non_negative);
    precision_flag(t, &E::precision);
    vocab_flag(t, &E::vocab);
    device_flag(t, &E::device);
    threads_flag(t, &E::threads);
    quiet_flag(t, &E::quiet);
    t.group("Ranks (under mpirun, torchrun or srun)");
    comm_timeout_flag(t, &E::comm_timeout);
    rendezvous_flag(t, &E::rendezvous);
    return t;
  }();
  return table;
}

// Held-out conversations scored as train --sft scores them (eval/validation_loss.h): the mean loss over the
// assistant's tokens (and each <|assistant_end|>), the chat tokens in the softmax, conversations cut to --seq-len
// + 1 ids; under a launcher the ranks share the batches.
int evaluate_conversations(const EvalFlags& f, InferenceModel& m, Communicator& comm, const torch::Device& device,
                           Precision precision) {
  const GptConfig& config = m.model->config();
  const ChatFormat format = [&] {
    try {
      ChatFormat made(*m.codec, config.vocab_size);
      made.check_record(*m.chat_record);
      return made;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(m.description + ": " + e.what());
    }
  }();
  if (f.gave_val_fraction) {
    throw std::invalid_argument("--val-fraction does not apply to the --val conversations of a chat model (each is "
                                "held out and scored whole)");
  }
  const int64_t seq_len = f.seq_len == 0 ? config.block_size : f.seq_len;
  if (seq_len > config.block_size) throw std::invalid_argument("--seq-len exceeds the model's block size");
  const ChatExamples read = read_chat_examples(*f.val, format, /*skip_bad_records=*/false);
  BlockConversations block = cut_to_block(read.conversations, seq_len + 1);
  if (const std::string note = block.note("--val conversations", seq_len); !note.empty()) std::cout << note << std::endl;
  if (block.conversations.empty()) {
    throw std::invalid_argument("--val '" + *f.val + "': no conversation has an assistant token within --seq-len " +
                                std::to_string(seq_len) + " + 1 tokens");
  }
  const auto count = static_cast<int64_t>(block.conversations.size());
  const int64_t rows = std::min(f.batch_size, count);
  EvaluationPlan plan;
  plan.validation_batches = std::min(f.eval_steps, count / rows);  // whole batches: each conversation once
  plan.validation_vocab_limit = m.token_count;
  plan.conversations = true;
  std::cout << "val data: conversations " << *f.val << " (" << count << ", chat template '"
            << ChatFormat::kTemplateName << "'; " << plan.validation_batches * rows << " scored in "
            << plan.validation_batches << " batch(es))" << std::endl;
  const int64_t pad = m.codec->end_of_text() >= 0 ? m.codec->end_of_text() : format.tokens().bos;
  ChatBatchLoader loader(std::make_shared<const std::vector<RenderedChat>>(std::move(block.conversations)), rows,
                         seq_len, pad, /*shuffle=*/false, /*seed=*/0, comm.rank(), comm.world_size());
  plan.validation = &loader;
  const ValidationLoss result = Evaluator(plan, m.model, comm, device, precision).validation_loss();
  std::cout << strprintf("val loss: %.4f (%lld conversations, %.0f assistant tokens)", result.loss,
                         static_cast<long long>(plan.validation_batches * rows), result.targets)
            << std::endl;
  return 0;
}

// The loss is over the model's tokens only: the padding rows of a GPT-2 vocabulary (50257 -> 50304) take
// no part, as in sampling and in the exported (unpadded) model, which transformers then scores the same.
// Training's validation loss leaves them out too (issue 40: with them in the softmax it read 10.2714 where
// this read 10.2705 on the same checkpoint and batches, ln(50304/50257) = 0.0009 apart at the start).
// The pass itself is training's (eval/validation_loss.h): batch b is rank b % W's, losses and byte sums
// are summed over ranks.
int evaluate_val_loss(const EvalFlags& f, InferenceModel& m, Communicator& comm, const torch::Device& device,
                      Precision precision) {
  const GptConfig& config = m.model->config();
  std::shared_ptr<const TokenSource> tokens;
  if (is_text_file(*f.val)) {
    if (holds_conversations(*f.val)) {
      if (m.chat_record) return evaluate_conversations(f, m, comm, device, precision);
      std::cout << "note: --val '" << *f.val << "' holds conversations, but " << m.description
                << " is no chat model (train --sft): its JSON lines are scored as plain text" << std::endl;
    }
    tokens = validation_text_tokens(*f.val, *m.codec, f.val_fraction);
    std::cout << "val data: text " << *f.val << " (its last " << option_detail::number_text(f.val_fraction * 100)
              << "%: " << tokens->size() << " tokens, "
              << tokenizer_kind_name(m.codec->kind()) << " tokenizer)" << std::endl;
  } else {
    const auto files = validation_files(*f.val);
    std::string names;
    for (const auto& file : files) names += (names.empty() ? "" : ", ") + file.string();
    tokens = std::make_shared<TokenStream>(files, static_cast<uint32_t>(m.token_count));
    std::cout << "val data: " << files.size() << " file(s): " << names << std::endl;
  }
  const int64_t seq_len = f.seq_len == 0 ? config.block_size : f.seq_len;
  if (seq_len > config.block_size) throw std::invalid_argument("--seq-len exceeds the model's block size");
  ShardedBatchLoader loader(tokens, f.batch_size, seq_len, comm.rank(), comm.world_size());
  const ValidationBatches batches = validation_batches(f.eval_steps, loader);
  if (!batches.note.empty()) std::cout << batches.note << std::endl;
  // Bits per byte needs the bytes of each token: token data without a tokenizer has only the loss.
  std::optional<BitsPerByte> bpb;
  if (m.codec) bpb.emplace(m.codec->token_byte_counts(), config.vocab_size, device);
  EvaluationPlan plan;
  plan.validation = &loader;
  plan.validation_batches = batches.count;
  plan.validation_vocab_limit = m.token_count;
  if (bpb) plan.bits_per_byte = &*bpb;
  Progress progress("val", static_cast<double>(batches.count), "batches", f.quiet, std::cout);
  const ValidationLoss result =
      Evaluator(plan, m.model, comm, device, precision).validation_loss([&](int64_t done, double running_loss) {
        progress.update(static_cast<double>(done), strprintf("running loss %.4f", running_loss));
      });
  progress.finish();
  const std::string shape = strprintf("%lld batches of %lld x %lld tokens", static_cast<long long>(batches.count),
                                      static_cast<long long>(f.batch_size), static_cast<long long>(seq_len));
  if (bpb) {
    std::cout << strprintf("val loss: %.4f | bpb: %.4f (%s; %.0f bytes)", result.loss, result.bits_per_byte,
                           shape.c_str(), bpb->bytes())
              << std::endl;
  } else {
    std::cout << strprintf("val loss: %.4f (%s; no bits per byte: the model has no tokenizer, give --vocab DIR)",
                           result.loss, shape.c_str())
              << std::endl;
  }
  return 0;
}

int evaluate_hellaswag_file(const EvalFlags& f, InferenceModel& m, Communicator& comm, const torch::Device& device,
                            Precision precision) {
  if (m.codec->kind() != TokenizerKind::gpt2 && m.codec->kind() != TokenizerKind::hf) {
    throw std::invalid_argument("--hellaswag needs a model with a BPE tokenizer; " + m.description + " is " +
                                std::string(tokenizer_kind_name(m.codec->kind())) + "-level");
  }
  const auto examples = read_tokenized_hellaswag(*f.hellaswag, *m.codec, f.examples);
  const auto scored = f.examples > 0 ? std::min<int64_t>(f.examples, static_cast<int64_t>(examples.size()))
                                      : static_cast<int64_t>(examples.size());
  EvaluationPlan plan;
  plan.hellaswag = &examples;
  plan.hellaswag_examples = f.examples;
  Progress progress("hellaswag", static_cast<double>(scored), "examples", f.quiet, std::cout);
  const HellaSwagResult r =
      Evaluator(plan, m.model, comm, device, precision).hellaswag([&](int64_t done, int64_t correct) {
        progress.update(static_cast<double>(done),
                        strprintf("accuracy %.4f", static_cast<double>(correct) / static_cast<double>(done)));
      });
  progress.finish();
  std::cout << strprintf("hellaswag accuracy: %.4f (%lld/%lld examples, length-normalized)", r.accuracy(),
                         static_cast<long long>(r.correct), static_cast<long long>(r.total))
            << std::endl;
  return 0;
}

// nanochat's CORE: a line per task, then the mean of the centered accuracies; the JSON as rank 0 writes it.
int evaluate_core_bundle(const EvalFlags& f, InferenceModel& m, Communicator& comm, const torch::Device& device,
                         Precision precision) {
  const CoreBundle bundle = read_core_bundle(*f.core);
  std::cout << strprintf("CORE bundle: %s (%zu tasks)", f.core->c_str(), bundle.tasks.size()) << std::endl;
  for (const std::string& note : core_fewshot_notes(bundle, f.core_max_per_task)) std::cout << note << std::endl;
  if (m.codec->end_of_text() < 0) std::cout << "note: the tokenizer has no BOS token; prompts start with their text" << std::endl;
  EvaluationPlan plan;
  plan.core = &bundle;
  plan.core_codec = m.codec.get();
  plan.core_max_per_task = f.core_max_per_task;
  plan.core_vocab_limit = m.token_count;
  std::optional<Progress> progress;
  std::string current;
  const CoreScore score = Evaluator(plan, m.model, comm, device, precision).core(
      [&](const std::string& label, int64_t done, int64_t total) {
        if (label != current) {
          if (progress) progress->finish();
          progress.emplace("core " + label, static_cast<double>((total + comm.world_size() - 1) / comm.world_size()),
                           "items", f.quiet, std::cout);
          current = label;
        }
        progress->update(static_cast<double>(done));
      });
  if (progress) progress->finish();
  size_t width = 4;
  for (const CoreTaskScore& t : score.tasks) width = std::max(width, t.label.size());
  for (const CoreTaskScore& t : score.tasks) {
    std::cout << strprintf("%-*s  accuracy %.4f  centered %+.4f  items %lld", static_cast<int>(width), t.label.c_str(),
                           t.accuracy, t.centered, static_cast<long long>(t.items))
              << std::endl;
  }
  std::cout << strprintf("CORE: %.4f", score.core) << std::endl;
  if (f.json && comm.rank() == 0) write_file_atomically(*f.json, core_score_json(score).dump(2) + "\n");
  return 0;
}

int evaluate_builtin_task(const EvalFlags& f, InferenceModel& m, const torch::Device& device) {
  const int64_t count = f.examples == 0 ? 200 : f.examples;
  const auto examples = builtin_heldout_examples(*f.task, static_cast<size_t>(count));
  int64_t correct = 0, shown = 0;
  SamplingOptions greedy{/*max_new_tokens=*/0, /*temperature=*/0.0, /*top_k=*/0, /*vocab_limit=*/m.token_count};
  for (const TaskExample& e : examples) {
    const auto prompt_ids = encode_given_text(*m.codec, e.prompt, "--task " + *f.task);
    greedy.max_new_tokens = static_cast<int64_t>(encode_given_text(*m.codec, e.answer, "--task " + *f.task).size());
    auto out = generate(m.model, torch::tensor(prompt_ids, torch::kLong).unsqueeze(0).to(device), greedy);
    auto tail = out.squeeze(0).slice(0, static_cast<int64_t>(prompt_ids.size())).to(torch::kCPU);
    const std::string answer =
        m.codec->decode(std::vector<int64_t>(tail.data_ptr<int64_t>(), tail.data_ptr<int64_t>() + tail.numel()));
    const bool ok = answer == e.answer;
    correct += ok ? 1 : 0;
    if (shown++ < f.show) {
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

// Options that belong to other modes are refused rather than ignored.
void refuse_options_of_other_modes(const Parsed<EvalFlags>& flags) {
  const EvalFlags& f = flags.config;
  const std::string mode =
      f.val ? "with --val" : f.hellaswag ? "with --hellaswag" : f.core ? "with --core" : "with --task";
  if (!f.val) {
    for (const char* name : {"eval-steps", "batch-size", "seq-len"}) flags.refuse(name, mode + " (it applies to --val)");
  }
  if (f.val || f.core) flags.refuse("examples", mode + " (it applies to --hellaswag and --task)");
  if (!f.hellaswag) flags.refuse("hellaswag-examples", mode + " (it applies to --hellaswag)");
  if (!f.core) {
    flags.refuse("core-max-per-task", mode + " (it applies to --core)");
    flags.refuse("json", mode + " (it applies to --core)");
  }
  if (flags.gave("examples") && flags.gave("hellaswag-examples")) {
    throw std::invalid_argument("give --examples or --hellaswag-examples (the same count), not both");
  }
  if (!f.val || !is_text_file(*f.val)) flags.refuse("val-fraction", "without a --val text (it cuts a text's end)");
  if (!f.task) flags.refuse("show", mode + " (it applies to --task)");
  if (f.task) flags.refuse("precision", mode + " (greedy decoding runs in fp32)");
}

// Rank 0 alone prints: the other ranks' standard output goes to a buffer that takes every write and keeps
// nothing while eval runs (their errors still reach standard error, named by rank).
class SilentUnlessRankZero {
 public:
  explicit SilentUnlessRankZero(int rank) : saved_(rank == 0 ? nullptr : std::cout.rdbuf(&discard_)) {}
  ~SilentUnlessRankZero() {
    if (saved_ != nullptr) std::cout.rdbuf(saved_);
  }
  SilentUnlessRankZero(const SilentUnlessRankZero&) = delete;
  SilentUnlessRankZero& operator=(const SilentUnlessRankZero&) = delete;

 private:
  struct Discard final : std::streambuf {
    int overflow(int c) override { return traits_type::not_eof(c); }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
  };
  Discard discard_;
  std::streambuf* saved_;
};

int run_eval(const Parsed<EvalFlags>& flags, const JobSession& job) {
  EvalFlags f = flags.config;
  if (f.hellaswag_examples) f.examples = *f.hellaswag_examples;
  f.gave_val_fraction = flags.gave("val-fraction");
  const int modes = static_cast<int>(f.val.has_value()) + static_cast<int>(f.hellaswag.has_value()) +
                    static_cast<int>(f.task.has_value()) + static_cast<int>(f.core.has_value());
  if (modes != 1) throw std::invalid_argument("eval needs exactly one of --val, --hellaswag, --core or --task");
  refuse_options_of_other_modes(flags);
  const WorldInfo& w = job.world();
  if (f.task && w.world_size > 1) {
    throw std::invalid_argument("eval --task runs in one process: start it as a single process (not under mpirun, "
                                "torchrun or srun)");
  }
  const SilentUnlessRankZero silence(w.rank);
  const torch::Device device = pick_device(f.device, w.local_rank, w.local_size);
  const int64_t threads = set_cpu_threads(f.threads, w.local_size);
  JobCommunicators comms(job, device, f.comm_timeout, f.rendezvous);
  Communicator& comm = comms.device();
  std::cout << "device: " << device_name(device) << std::endl;
  if (device.is_cpu()) std::cout << "threads: " << threads << (w.world_size > 1 ? " per rank" : "") << std::endl;
  if (w.world_size > 1) std::cout << "world: " << world_layout_text(w) << " | backend " << comm.backend_name() << std::endl;
  const Precision precision = precision_for_device(f.precision, device);
  // Token data needs no tokenizer, and a model trained on it without --vocab has none; one it has gives
  // the bytes of bits per byte.
  const bool need_tokenizer = !f.val || is_text_file(*f.val);
  InferenceModel m = load_inference_model(*f.checkpoint, device, f.vocab.value_or(""), need_tokenizer,
                                          /*tokenizer_if_any=*/true);
  std::cout << "model: " << m.description << std::endl;
  if (f.val) return evaluate_val_loss(f, m, comm, device, precision);
  if (f.hellaswag) return evaluate_hellaswag_file(f, m, comm, device, precision);
  if (f.core) return evaluate_core_bundle(f, m, comm, device, precision);
  // Greedy answers, one token at a time, each reading every weight (model/huge_page_weights.h); the
  // line it returns is for generate --timing, not for eval's output.
  if (device.is_cpu()) static_cast<void>(move_weights_to_huge_pages(*m.model));
  return evaluate_builtin_task(f, m, device);
}

}  // namespace

Command eval_command() {
  return make_command<EvalFlags>("eval",
                                 "eval --checkpoint PATH (--val DATA | --hellaswag FILE | --core DIR | --task NAME) [options]",
                                 "validation loss and bits per byte, HellaSwag, CORE or built-in task accuracy of a model",
                                 /*multi_rank=*/true, &eval_flag_table, &run_eval);
}

}  // namespace mygpt
