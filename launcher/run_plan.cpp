#include "launcher/run_plan.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "common/file_io.h"
#include "common/strprintf.h"
#include "dataloader/best_fit_packer.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/memory_reuse.h"
#include "model/attention_backend.h"
#include "model/layer_norm_cuda.h"
#include "model/lm_loss_cuda.h"
#include "tokenizer/text_codec.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_space.h"
#include "trainer/memory_estimate.h"

namespace mygpt {
namespace {

// The BPE tokenizer folder of a stored model (GPT-2's files or a tokenizer.json), when its files are (still)
// there.
std::optional<std::string> stored_bpe_tokenizer(const RunStart& start) {
  if (!start.model) return std::nullopt;
  const TokenizerKind kind = start.model->tokenizer_kind;
  if (kind != TokenizerKind::gpt2 && kind != TokenizerKind::hf) return std::nullopt;
  if (folder_tokenizer_kind(start.model->tokenizer_data) != kind) return std::nullopt;
  return start.model->tokenizer_data;
}

RunTokenizer run_tokenizer(const TrainingData& data, const RunStart& start) {
  if (data.tokenizer_kind != TokenizerKind::none || !start.model) return {data.tokenizer_kind, data.tokenizer_data};
  return {start.model->tokenizer_kind, start.model->tokenizer_data};
}

// The token that starts each document, for --packing best-fit: the tokenizer's (GPT-2's <|endoftext|>, a
// tokenizer.json's BOS), which prepare writes before every document.
int64_t best_fit_delimiter(const RunTokenizer& tokenizer, DataOrder requested) {
  if (requested == DataOrder::shuffled || requested == DataOrder::random) {
    throw std::invalid_argument(std::string("--packing best-fit reads the documents in order: leave out --data-order ") +
                                data_order_name(requested));
  }
  int64_t bos = -1;
  if (tokenizer.kind == TokenizerKind::gpt2 || tokenizer.kind == TokenizerKind::hf) {
    bos = make_text_codec(tokenizer.kind, tokenizer.data)->end_of_text();
  }
  if (bos < 0) {
    throw std::invalid_argument("--packing best-fit needs documents delimited by the tokenizer's BOS / <|endoftext|>, "
                                "and this run's tokenizer has no such token: prepare the documents with a BPE "
                                "tokenizer (mygpt-ddp prepare --input FILE --vocab DIR --out SHARDS) and train on SHARDS");
  }
  return bos;
}

// Best-fit crops what a row cannot hold: on documents far longer than a row it trains on each one's first
// row alone, epoch after epoch (one text prepared whole is one document: every row the same tokens). The
// documents the first row is chosen from say so before step 1: refused where at least 90% of their tokens
// lie beyond their first row, noted where half do (nanochat crops about 35% of FineWeb at 2048 tokens).
std::string judge_best_fit_documents(const std::shared_ptr<const TokenSource>& train, int64_t bos, int64_t seq_len) {
  const auto row = static_cast<uint64_t>(seq_len) + 1;
  const BestFitPacker::Survey s = BestFitPacker(train, bos, row).survey();
  const double share = s.share_beyond_a_row();
  const std::string what = strprintf(
      "%.1f%% of the tokens of the %s%llu document(s) %s lie beyond a row of %llu tokens (--seq-len + 1) and would be "
      "cropped",
      100 * share, s.documents < BestFitPacker::kBufferDocuments ? "" : "first ",
      static_cast<unsigned long long>(s.documents),
      strprintf("(%llu tokens on average)", static_cast<unsigned long long>(s.tokens / std::max<uint64_t>(1, s.documents)))
          .c_str(),
      static_cast<unsigned long long>(row));
  const std::string routes = "--packing rows (the default) trains on all of them, or split the documents "
                             "(prepare a JSON-lines file of one document per line)";
  if (share >= 0.9) {
    throw std::invalid_argument("--packing best-fit: the documents are far longer than a row: " + what +
                                ", so every epoch trains on their first rows alone: " + routes);
  }
  if (share >= 0.5) return "note: --packing best-fit: " + what + ": " + routes;
  return {};
}

// The order the loaded data is read in, and the log's note on it. Conversations are read shuffled each
// epoch (from --seed) unless --data-order sequential; --packing best-fit reads documents in order.
ChosenDataOrder resolve_data_order(const RunPlan& plan, const TrainingData& data, int world_size) {
  const DataOrder requested = plan.data.data_order;
  if (data.chat && plan.data.packing == Packing::best_fit) {
    throw std::invalid_argument("--packing best-fit packs the documents of token data; --sft gives each conversation "
                                "rows of its own: leave out --packing");
  }
  if (data.chat) {
    if (requested == DataOrder::random) {
      throw std::invalid_argument("--data-order random: with --sft conversations are read shuffled (auto) or sequential");
    }
    return {requested == DataOrder::sequential ? DataOrder::sequential : DataOrder::shuffled, ""};
  }
  if (plan.data.packing == Packing::best_fit) return {DataOrder::sequential, ""};  // documents in order
  const TrainOptions& o = plan.train;
  const auto tokens_per_step =
      static_cast<uint64_t>(o.batch_size * o.seq_len * o.grad_accum) * static_cast<uint64_t>(world_size);
  // A run that ends with its time budget reads an unknown number of tokens (kUnknownTokens).
  uint64_t tokens = kUnknownTokens;
  if (o.steps != kUnboundedSteps && __builtin_mul_overflow(tokens_per_step, static_cast<uint64_t>(o.steps), &tokens)) {
    tokens = kUnknownTokens - 1;  // more than any data holds
  }
  return choose_data_order(requested, plan.stored_options, data.train->size(), tokens);
}

// --time-budget ends with the validation's bits per byte: a run that could not compute them is refused before
// it starts, not after its budget.
void require_final_bits_per_byte(const RunPlan& plan, const TrainingData& data) {
  if (!plan.train.time_budget) return;
  const std::string what = "--time-budget ends with the validation bits per byte (val_bpb), ";
  if (data.chat) {
    throw std::invalid_argument(what + "which --sft does not compute (its loss is over the replies' tokens): give --steps");
  }
  if (plan.tokenizer.kind == TokenizerKind::none) {
    throw std::invalid_argument(what + "which need the data's tokenizer, and this token data has none: give --vocab DIR");
  }
  const auto batch_tokens = static_cast<uint64_t>(plan.train.batch_size * plan.train.seq_len);
  if (!data.val || data.val->size() <= batch_tokens) {
    throw std::invalid_argument(
        what + strprintf("and this data has no validation split of more than one batch (--batch-size x --seq-len = "
                         "%llu tokens): give --val-data, or a text with a larger --val-fraction",
                         static_cast<unsigned long long>(batch_tokens)));
  }
}

// What needs the loaded data: the order it is read in, its tokenizer (for samples, HellaSwag and CORE), and
// best-fit's document delimiter.
void resolve_with_data(RunPlan& plan, const TrainingData& data, const RunStart& start, const RunPlace& place) {
  plan.tokenizer = run_tokenizer(data, start);
  require_final_bits_per_byte(plan, data);
  const ChosenDataOrder order = resolve_data_order(plan, data, place.world_size);
  plan.data_order = order.order;
  plan.notes.data_order = order.note;
  if (place.note && !order.note.empty()) {
    place.note(order.note);
    plan.notes.data_order.clear();
  }
  if (!data.chat && plan.data.packing == Packing::best_fit) {
    plan.document_delimiter = best_fit_delimiter(plan.tokenizer, plan.data.data_order);
    plan.notes.packing = judge_best_fit_documents(data.train, plan.document_delimiter, plan.train.seq_len);
    if (place.note && !plan.notes.packing.empty()) {
      place.note(plan.notes.packing);
      plan.notes.packing.clear();
    }
  }
}

// What this process's device and build allow: CUDA-only flags, and the CUDA kernels a binary built
// without nvcc lacks (refused when asked by name, else noted and replaced by ATen's).
void resolve_for_this_process(RunPlan& plan, const torch::Device& device) {
  const Parsed<TrainFlags>& flags = plan.flags;
  TrainOptions& o = plan.train;
  std::vector<std::string> cuda_only_flags;
  if (flags.gave("attention") && o.attention != AttentionBackend::automatic && o.attention != AttentionBackend::math) {
    for (const auto& [name, backend] : attention_backend_names()) {
      if (backend == o.attention) cuda_only_flags.push_back("--attention " + name);
    }
  }
  if (flags.gave("cuda-loss-kernel") && o.cuda_loss_kernel) cuda_only_flags.push_back("--cuda-loss-kernel");
  if (flags.gave("cuda-norm-kernel") && o.cuda_norm_kernel) cuda_only_flags.push_back("--cuda-norm-kernel");
  refuse_cuda_only_flags(device, cuda_only_flags);
  if (o.peak_tflops == 0 && device.is_cuda()) o.peak_tflops = known_peak_tflops(device_name(device));
}

// The kernels, after what needs the data: as build_trainer met them.
void resolve_kernels(RunPlan& plan, const torch::Device& device) {
  const TrainOptions& o = plan.train;
  // The kernel is the default on CUDA (measured: evidence/gpu-runs/2026-11-26-h100); a binary built without nvcc
  // runs the ATen loss instead, and refuses only a run that asked for the kernel by name.
  const bool kernel_missing = o.cuda_loss_kernel && device.is_cuda() && !lm_loss_cuda_kernel_built();
  if (kernel_missing && plan.flags.gave("cuda-loss-kernel")) {
    throw std::invalid_argument("--cuda-loss-kernel: this binary was built without nvcc, so it has no CUDA loss kernel");
  }
  if (kernel_missing) {
    plan.notes.loss_kernel =
        "note: this binary was built without nvcc: the fused loss runs as ATen ops, not the CUDA loss kernel";
  }
  plan.cuda_loss_kernel = o.cuda_loss_kernel && !kernel_missing;
  // The LayerNorm kernel is the default on CUDA too (8.6% less time per GPT-2 step on an H100,
  // evidence/gpu-runs/2026-11-27-h100-2); without nvcc the blocks keep ATen's LayerNorm.
  const bool norm_kernel_missing = o.cuda_norm_kernel && device.is_cuda() && !layer_norm_cuda_kernel_built();
  if (norm_kernel_missing && plan.flags.gave("cuda-norm-kernel")) {
    throw std::invalid_argument("--cuda-norm-kernel: this binary was built without nvcc, so it has no CUDA LayerNorm "
                                "kernel");
  }
  plan.cuda_norm_kernel = o.cuda_norm_kernel && device.is_cuda() && !norm_kernel_missing;
}

// A run the device cannot hold is bad input, refused before the model is built: not half a minute of
// allocation ending in an allocator message or the OOM killer. `plan`'s estimate of what the run adds to
// this process (its runtime and data are resident already) against what the device has left. The
// estimate is within about a quarter of real peaks (tests/plan_accuracy_test.py), so a run refused here
// needs more than there is, not nearly as much.
void require_memory_for_run(const GptConfig& config, const TrainOptions& o, int ranks, const torch::Device& device,
                            bool kept_heap) {
  AvailableMemory available;
  if (device.is_cuda()) {
    available = {cuda_total_memory_bytes(std::max<int>(0, device.index())), "the GPU's memory"};
  } else if (device.is_mps()) {
    available = {mps_recommended_memory_bytes(), "the MPS device's recommended working set"};
  } else if (device.is_cpu()) {
    available = available_host_memory();
  }
  if (available.bytes <= 0) return;  // nothing to compare with (the system did not say)
  MemoryPlanInput input = memory_plan_input(config, o, ranks, device.is_cuda());
  input.kept_heap = device.is_cpu() && kept_heap;  // as plan counts it
  input.threads = at::get_num_threads();            // set by train before the run is built
  const double needed = estimate_memory(input).total_bytes;
  if (needed <= available.bytes) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  throw std::invalid_argument(strprintf(
      "this run needs about %.1f GiB per rank (plan's estimate: weights, gradients, AdamW state and activations of "
      "%lld parameters at --batch-size %lld x --seq-len %lld) and %s leaves %.1f GiB: choose a smaller model or "
      "micro-batch (`mygpt-ddp plan` with the same flags shows the parts)",
      needed / kGiB, static_cast<long long>(count_parameters(config).total()), static_cast<long long>(o.batch_size),
      static_cast<long long>(o.seq_len), available.source.c_str(), available.bytes / kGiB));
}

// The disk a run's checkpoints need, checked like memory before the first step (rank 0 writes them).
void require_disk_for_checkpoints(const GptConfig& config, const TrainOptions& o, const RunStart& start) {
  const int64_t start_step = start.resume ? start.model->checkpoint->meta.step : 0;
  const auto existing = static_cast<int64_t>(list_checkpoints(o.out).size());
  const CheckpointSpace space = checkpoint_space(config, o, start_step, existing);
  const std::optional<uint64_t> free = free_disk_bytes(o.out);
  if (!free || space.needed() <= static_cast<double>(*free)) return;
  constexpr double kMiB = 1024.0 * 1024.0;
  throw std::invalid_argument(strprintf(
      "--out '%s': this run's checkpoints need about %.1f MiB (%s, %.1f MiB each) and its file system has %.1f MiB "
      "free: free some space, lower --keep-checkpoints, or choose another --out",
      o.out.c_str(), space.needed() / kMiB, space.how.c_str(), space.bytes_each / kMiB,
      static_cast<double>(*free) / kMiB));
}

void require_room_for_run(const RunPlan& plan, const RunStart& start, const torch::Device& device, int world_size,
                          int rank) {
  require_memory_for_run(plan.model, plan.train, world_size, device,
                         keeps_freed_memory(plan.flags.config.runtime.keep_freed_memory));
  if (rank == 0) require_disk_for_checkpoints(plan.model, plan.train, start);
}

// A run resumed on another number of ranks keeps the tokens per step it trained with (its learning rate
// and schedule were chosen for that batch, and every data order counts its position in those batches):
// the accumulation is recomputed where the new ranks divide the batch, else the resume is refused, unless
// --grad-accum or --total-batch-tokens chooses the batch anew. A run whose accumulation came from a stored
// --total-batch-tokens has it recomputed already.
void keep_tokens_per_step_on_other_ranks(RunPlan& plan, const RunStart& start, int world_size) {
  if (!start.resume || !plan.stored_options) return;
  const auto entry = start.model->checkpoint->tensors.find("world_size");
  if (entry == start.model->checkpoint->tensors.end() || entry->second.numel() != 1) return;  // restore refuses it
  const int64_t saved_world = entry->second.item<int64_t>();
  TrainOptions& o = plan.train;
  if (saved_world == world_size || saved_world <= 0 || o.total_batch_tokens > 0 || plan.flags.gave("grad-accum") ||
      plan.flags.gave("total-batch-tokens")) {
    return;
  }
  Parsed<TrainFlags> saved;
  train_flag_table().take_stored(*plan.stored_options, saved);
  const TrainOptions& s = saved.config.train;
  const int64_t tokens = s.batch_size * s.seq_len * s.grad_accum * saved_world;  // checked when that run resolved
  const int64_t per_micro_step = o.batch_size * o.seq_len * world_size;
  if (tokens <= 0 || tokens % per_micro_step != 0) {
    throw std::invalid_argument(strprintf(
        "--resume: the checkpoint trained %lld tokens per step on %lld rank(s) (--batch-size %lld x --seq-len %lld x "
        "--grad-accum %lld), and %d rank(s) x --batch-size %lld x --seq-len %lld divide it by no whole "
        "accumulation: resume on %lld rank(s), or give --grad-accum to choose this run's batch",
        static_cast<long long>(tokens), static_cast<long long>(saved_world), static_cast<long long>(s.batch_size),
        static_cast<long long>(s.seq_len), static_cast<long long>(s.grad_accum), world_size,
        static_cast<long long>(o.batch_size), static_cast<long long>(o.seq_len), static_cast<long long>(saved_world)));
  }
  const int64_t accumulation = tokens / per_micro_step;
  if (accumulation == o.grad_accum) return;
  plan.notes.batch = strprintf(
      "note: resuming a %lld-rank checkpoint on %d rank(s): --grad-accum %lld (was %lld) keeps its %lld tokens per step",
      static_cast<long long>(saved_world), world_size, static_cast<long long>(accumulation),
      static_cast<long long>(o.grad_accum), static_cast<long long>(tokens));
  o.grad_accum = accumulation;
}

}  // namespace

TrainFlags RunPlan::resolved_flags() const {
  TrainFlags resolved = flags.config;
  resolved.train = train;
  resolved.data.data_order = data_order;
  return resolved;
}

RunPlan resolve_run(const Parsed<TrainFlags>& given, const RunStart& start, const DataSource& source,
                    const RunPlace& place) {
  RunPlan plan;
  plan.flags = resumed_flags(given, start);  // a resumed run's options are its checkpoint's, but for those given
  // --time-budget without --steps: the budget alone ends the run (a resumed run keeps its checkpoint's steps).
  if (!start.resume && plan.flags.config.train.time_budget && !plan.flags.gave("steps")) {
    plan.flags.config.train.steps = kUnboundedSteps;
  }
  const Parsed<TrainFlags>& flags = plan.flags;
  DataFacts facts;
  if (source.assumed) {
    facts = *source.assumed;
    plan.data = flags.config.data;
  } else {
    plan.data = resolve_data_options(flags, start);
    facts = source.read(plan.data);
  }
  plan.model = resolve_model_config(flags, facts.vocab_size, start);
  if (facts.loaded) require_data_fits_model(*facts.loaded, start, plan.model.vocab_size);
  plan.train = resolve_train_options(flags, plan.model, place.device, place.world_size);
  plan.data_order = plan.data.data_order;
  if (start.resume) plan.stored_options = start.model->checkpoint->meta.run_config;
  keep_tokens_per_step_on_other_ranks(plan, start, place.world_size);
  if (place.note && !plan.notes.batch.empty()) {
    place.note(plan.notes.batch);
    plan.notes.batch.clear();
  }
  if (place.here) {
    resolve_for_this_process(plan, place.device);
    require_room_for_run(plan, start, place.device, place.world_size, place.rank);
  }
  if (plan.train.warmup_steps != flags.config.train.warmup_steps) {
    plan.notes.warmup = "note: the default warm-up of " + std::to_string(flags.config.train.warmup_steps) +
                        " steps is longer than the " + std::to_string(plan.train.steps) + "-step run; warming up for " +
                        std::to_string(plan.train.warmup_steps);
    if (place.note) {
      place.note(plan.notes.warmup);
      plan.notes.warmup.clear();
    }
  }
  if (facts.loaded) resolve_with_data(plan, *facts.loaded, start, place);
  if (place.here) resolve_kernels(plan, place.device);
  return plan;
}

RunPlan plan_for_data(const Parsed<TrainFlags>& flags, const RunStart& start, const TrainingData& data,
                      const torch::Device& device, int world_size, int rank) {
  DataSource source;
  source.read = [&data](const DataOptions&) { return DataFacts{data.vocab_size, &data}; };
  return resolve_run(flags, start, source, RunPlace{device, world_size, /*here=*/true, rank, {}});
}


Parsed<TrainFlags> resumed_flags(const Parsed<TrainFlags>& flags, const RunStart& start) {
  if (!start.resume) return flags;
  Parsed<TrainFlags> resumed = flags;
  const std::string& stored = start.model->checkpoint->meta.run_config;
  try {
    // The checkpoint's --min-lr was derived from its --lr unless given: a new --lr derives its own.
    std::set<std::string> keep;
    if (flags.gave("lr") && !flags.gave("min-lr")) keep.insert("min-lr");
    train_flag_table().take_stored(stored, resumed, keep);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--resume " + start.model->path.string() + ": its stored options: " + e.what());
  }
  return resumed;
}

DataOptions resolve_data_options(const Parsed<TrainFlags>& flags, const RunStart& start) {
  DataOptions d = flags.config.data;
  const auto model_tokenizer = stored_bpe_tokenizer(start);
  if (d.sft) {  // conversations, tokenized by the data's --vocab or the model's BPE tokenizer
    if (!flags.gave("tokenizer") && (d.vocab || model_tokenizer)) {
      // GPT-2's tokenizer (its files, or a Hugging Face GPT-2 folder with vocab.json and merges.txt beside its
      // tokenizer.json) gets GPT-2's padded rows for the chat tokens; any other tokenizer.json is its own kind.
      const std::string folder = d.vocab.value_or(model_tokenizer.value_or(""));
      const bool other = folder_tokenizer_kind(folder) == TokenizerKind::hf && !is_gpt2_tokenizer_folder(folder);
      d.tokenizer = other ? TokenizerKind::hf : TokenizerKind::gpt2;
    }
  } else if (is_token_data(d.data)) {
    if (start.model && !d.vocab_size) d.vocab_size = start.model->config.vocab_size;
  } else if (!flags.gave("tokenizer") && (d.vocab || model_tokenizer)) {
    // Without --tokenizer, the folder of --vocab (or the model's) says which BPE it is.
    d.tokenizer = folder_tokenizer_kind(d.vocab.value_or(model_tokenizer.value_or(""))).value_or(TokenizerKind::gpt2);
  }
  // The Data rows' declared refusals (launcher/data_flags.cpp), judged on the options as resolved: that of
  // --skip-bad-records first and that of --vocab (on the tokenizer resolved) last, the order in which a
  // command line with several is told of the first.
  Parsed<TrainFlags> run = flags;
  run.config.data = d;
  const std::string first = "skip-bad-records", last = "vocab";
  run.require_option(first);
  run.require_option(last);
  const OptionTable<TrainFlags>& table = train_flag_table();
  table.refuse_unused(run, [&](const auto& row) { return row.name() == first; });
  table.refuse_unused(run, [&](const auto& row) {
    return row.group() == kDataGroup && row.name() != first && row.name() != last;
  });
  table.refuse_unused(run, [&](const auto& row) { return row.name() == last; });
  const bool token_data = !d.sft && is_token_data(d.data);
  if (!token_data && d.tokenizer != TokenizerKind::character && !d.vocab) d.vocab = model_tokenizer;
  return d;
}

TrainOptions resolve_train_options(const Parsed<TrainFlags>& flags, const GptConfig& model, const torch::Device& device,
                                   int world_size) {
  TrainOptions o = flags.config.train;
  o.precision = precision_for_device(o.precision, device);
  // The rows' declared refusals (launcher/run_flags.cpp, training_flags.cpp): those of the Run group, then
  // those of the Training group, those judged on the precision this device resolves last (the order in which
  // a command line with several is told of the first).
  Parsed<TrainFlags> run = flags;
  run.config.train.precision = o.precision;
  const OptionTable<TrainFlags>& table = train_flag_table();
  const auto training = [](const OptionRow<TrainFlags>& row) { return row.group().rfind("Training", 0) == 0; };
  const auto on_precision = [](const OptionRow<TrainFlags>& row) {
    return std::any_of(row.refusals().begin(), row.refusals().end(), [](const auto& refusal) {
      return std::find(refusal.reads.begin(), refusal.reads.end(), "precision") != refusal.reads.end();
    });
  };
  table.refuse_unused(run, [&](const auto& row) { return row.group() != kDataGroup && !training(row); });
  table.refuse_unused(run, [&](const auto& row) { return training(row) && !on_precision(row); });
  if (o.zero == 3) {
    flags.refuse("bucket-mb", "with --zero 3 (each unit's gradients are reduce-scattered whole, not in buckets)");
    flags.refuse("ddp-overlap", "with --zero 3 (each unit's gradients are reduce-scattered as its backward ends)");
  }
  if (o.seq_len == 0) o.seq_len = model.block_size;
  if (o.seq_len > model.block_size) {
    throw std::invalid_argument("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's block size " +
                                std::to_string(model.block_size));
  }
  // Accumulation: given directly, or derived from the total batch so that the recipe's batch holds
  // whatever the number of ranks and the micro-batch size. An explicit --grad-accum wins over the
  // recipe's total; both given explicitly contradict each other.
  if (flags.gave("grad-accum") && flags.gave("total-batch-tokens") && o.total_batch_tokens > 0) {
    throw std::invalid_argument("give --total-batch-tokens or --grad-accum, not both");
  }
  if (flags.gave("grad-accum")) o.total_batch_tokens = 0;
  // Token counts are int64 everywhere (the step's tokens, the data's epochs, the plan): a batch whose
  // count does not fit is refused, not wrapped round to a negative or zero batch.
  const auto tokens_of = [&](int64_t accumulation) {
    int64_t tokens = 1;
    for (const int64_t factor : std::initializer_list<int64_t>{o.batch_size, o.seq_len, accumulation, world_size}) {
      if (__builtin_mul_overflow(tokens, factor, &tokens)) {
        throw std::invalid_argument("--batch-size " + std::to_string(o.batch_size) + " x --seq-len " +
                                    std::to_string(o.seq_len) + " x --grad-accum " + std::to_string(accumulation) +
                                    " x " + std::to_string(world_size) +
                                    " rank(s) is too large: the tokens per step overflow a 64-bit count");
      }
    }
    return tokens;
  };
  if (o.total_batch_tokens > 0) {
    const int64_t per_micro_step = tokens_of(1);
    if (o.total_batch_tokens % per_micro_step != 0) {
      throw std::invalid_argument(
          "--total-batch-tokens " + std::to_string(o.total_batch_tokens) +
          " is not a multiple of batch size x seq len x ranks = " + std::to_string(per_micro_step));
    }
    o.grad_accum = o.total_batch_tokens / per_micro_step;
  }
  static_cast<void>(tokens_of(o.grad_accum));
  // Derived from the values given, so that a lower --lr does not fall below a fixed floor.
  if (!o.min_lr) o.min_lr = o.lr / 10;
  if (*o.min_lr > o.lr) {
    throw std::invalid_argument("--lr " + option_detail::number_text(o.lr) + " is below --min-lr " +
                                option_detail::number_text(*o.min_lr) + " (the cosine decay ends at --min-lr)");
  }
  // A warm-up as long as the run never reaches the peak: given explicitly it is refused; the default
  // (100, a recipe's) shrinks to a tenth of a shorter run (build_trainer notes it).
  if (!o.time_budget && o.warmup_steps > o.steps) {  // a time budget warms up for --warmup-fraction of it
    if (flags.gave("warmup-steps")) {
      throw std::invalid_argument("--warmup-steps " + std::to_string(o.warmup_steps) +
                                  " is longer than the run (--steps " + std::to_string(o.steps) + ")");
    }
    o.warmup_steps = o.steps / 10;
  }
  // Checkpoints at each evaluation by default, so that a run killed outright (kill -9, the OOM killer)
  // loses at most an evaluation interval; they are for recovery, so only the newest two are kept.
  if (!o.checkpoint_every) {
    o.checkpoint_every = o.eval_every;
    if (!o.keep_checkpoints) o.keep_checkpoints = 2;
  }
  if (!o.keep_checkpoints) o.keep_checkpoints = 0;
  table.refuse_unused(run, on_precision);
  return o;
}


}  // namespace mygpt
