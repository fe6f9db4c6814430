#include "launcher/run_builder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/file_io.h"
#include "common/strprintf.h"
#include "dataloader/chat_batch_loader.h"
#include "dataloader/chat_data.h"
#include "dataloader/core_bundle.h"
#include "dataloader/hellaswag_reader.h"
#include "distributed/gradient_sync.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/memory_reuse.h"
#include "launcher/run_course.h"
#include "model/attention_backend.h"
#include "model/layer_norm_cuda.h"
#include "model/lm_loss_cuda.h"
#include "model/new_token_rows.h"
#include "model/sampling.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_space.h"
#include "trainer/injected_overflow.h"
#include "trainer/memory_estimate.h"
#include "trainer/validation_batches.h"

namespace mygpt {
namespace {

// The tokenizer of the run's ids: the data's, or (token data without one) the stored model's it starts
// from, whose ids the data must be to train it.
struct RunTokenizer {
  TokenizerKind kind = TokenizerKind::none;
  std::string data;
};

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
    throw std::invalid_argument("--packing best-fit needs documents delimited by the tokenizer's BOS / <|endoftext|>: "
                                "train on token shards from prepare with a BPE tokenizer (its files beside them) or on "
                                "a text with --vocab; this run's tokenizer has no such token");
  }
  return bos;
}

std::vector<TokenizedHellaSwag> load_hellaswag(const DataOptions& d, const RunTokenizer& tokenizer, int64_t examples) {
  if (!d.hellaswag) return {};
  if (tokenizer.kind != TokenizerKind::gpt2 && tokenizer.kind != TokenizerKind::hf) {
    throw std::invalid_argument("--hellaswag needs a BPE tokenizer: give --vocab DIR (and token data of it)");
  }
  const auto codec = make_text_codec(tokenizer.kind, tokenizer.data);
  return read_tokenized_hellaswag(*d.hellaswag, *codec, examples);
}

// Samples draw from their own CPU generator, so printing them leaves training's random streams alone.
std::function<std::string(Gpt&)> make_sampler(const TrainOptions& o, const RunTokenizer& tokenizer,
                                              const torch::Device& device, std::function<bool()> stop_requested) {
  if (o.sample_every == 0) return {};
  if (tokenizer.kind == TokenizerKind::none) {
    throw std::invalid_argument("--sample-every needs a tokenizer, and this token data has none: give --vocab DIR");
  }
  auto codec = std::shared_ptr<TextCodec>(make_text_codec(tokenizer.kind, tokenizer.data));
  const auto prompt = encode_given_text(*codec, o.sample_prompt, "--sample-prompt");
  if (prompt.empty()) throw std::invalid_argument("--sample-prompt must not be empty");
  SamplingOptions sampling{o.sample_tokens, 1.0, 50, /*vocab_limit=*/codec->vocab_size()};
  auto generator = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  // Rank 0 alone samples: a stop asked meanwhile ends the sample at the next token, and the step after
  // it, where the ranks agree on stopping, saves the checkpoint.
  struct Stopped {};
  return [codec, prompt, sampling, generator, device, stop_requested](Gpt& m) mutable {
    generator.set_current_seed(generator.current_seed());  // the same sample stream every time
    torch::Tensor out;
    try {
      out = generate(m, torch::tensor(prompt, torch::kLong).unsqueeze(0).to(device), sampling, generator,
                     [&](const torch::Tensor&) {
                       if (stop_requested && stop_requested()) throw Stopped{};
                     });
    } catch (const NonFiniteLogits&) {  // the skipped steps and --max-bad-steps deal with a diverged run
      return std::string("(none: the model's logits are not finite)");
    } catch (const Stopped&) {
      return std::string("(cut short: a stop was requested)");
    }
    out = out.squeeze(0).to(torch::kCPU);
    return with_invalid_utf8_replaced(
        codec->decode(std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel())));
  };
}

// A fault for tests of the skip path (tests/mpi/fp16_test.sh): MYGPT_TEST_INJECT_OVERFLOW=RANK:STEP[,...]
// makes this rank's gradients overflow at those steps, as an fp16 backward's do. Unset: none.
std::function<bool(int64_t)> injected_overflows(int rank) {
  const char* spec = std::getenv("MYGPT_TEST_INJECT_OVERFLOW");
  if (spec == nullptr || *spec == '\0') return {};
  std::set<int64_t> steps;
  std::istringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    long long r = -1, step = -1;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%lld:%lld%c", &r, &step, &tail) != 2 || r < 0 || step < 0) {
      throw std::invalid_argument(std::string("MYGPT_TEST_INJECT_OVERFLOW: expected RANK:STEP[,RANK:STEP...], got '") +
                                  spec + "'");
    }
    if (r == rank) steps.insert(step);
  }
  return [steps](int64_t step) { return steps.count(step) > 0; };
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

// Fine-tuning's loaders over conversations cut to this run's rows: the training ones shuffled each epoch
// (from --seed) unless --data-order sequential, the held-out ones in their order. Returns the order.
DataOrder add_conversation_loaders(const ChatData& chat, const TrainOptions& o, DataOrder requested,
                                   const Communicator& comm, const RunOutput& output, TrainerParts& parts) {
  if (requested == DataOrder::random) {
    throw std::invalid_argument("--data-order random: with --sft conversations are read shuffled (auto) or sequential");
  }
  const DataOrder order = requested == DataOrder::sequential ? DataOrder::sequential : DataOrder::shuffled;
  BlockConversations train = cut_to_block(*chat.train, o.seq_len + 1);
  if (const std::string note = train.note("training conversations", o.seq_len); !note.empty()) output.print(note);
  if (train.conversations.empty()) {
    throw std::invalid_argument("no training conversation has an assistant token within --seq-len " +
                                std::to_string(o.seq_len) + " + 1 tokens");
  }
  parts.sft = true;
  parts.train_loader = std::make_unique<ChatBatchLoader>(
      std::make_shared<const std::vector<RenderedChat>>(std::move(train.conversations)), o.batch_size, o.seq_len,
      chat.pad_id, order == DataOrder::shuffled, o.seed, comm.rank(), comm.world_size());
  // The held-out loss scores the chat tokens too: <|assistant_end|> is a target.
  parts.val_vocab_limit = chat.ids_end;
  if (!chat.val) {
    if (o.eval_every > 0) output.print("note: no held-out conversations; validation loss is off");
    return order;
  }
  BlockConversations val = cut_to_block(*chat.val, o.seq_len + 1);
  if (const std::string note = val.note("held-out conversations", o.seq_len); !note.empty()) output.print(note);
  // Whole batches only: a pass scores each held-out conversation at most once.
  const auto whole_batches = static_cast<int64_t>(val.conversations.size()) / o.batch_size;
  if (whole_batches == 0) {
    if (o.eval_every > 0) {
      output.print("note: fewer held-out conversations than one batch (--batch-size " + std::to_string(o.batch_size) +
                   "); validation loss is off");
    }
    return order;
  }
  parts.sft_val_batches = std::min(o.eval_steps, whole_batches);
  if (o.eval_every > 0 && o.eval_steps > whole_batches) {
    output.print(strprintf("note: --eval-steps %lld asks for more batches than the held-out conversations fill; "
                           "scoring those %lld once each",
                           static_cast<long long>(o.eval_steps), static_cast<long long>(whole_batches)));
  }
  parts.sft_val_loader = std::make_unique<ChatBatchLoader>(
      std::make_shared<const std::vector<RenderedChat>>(std::move(val.conversations)), o.batch_size, o.seq_len,
      chat.pad_id, /*shuffle=*/false, o.seed, comm.rank(), comm.world_size());
  return order;
}

}  // namespace

std::unique_ptr<Trainer> build_trainer(const Parsed<TrainFlags>& given_flags, const TrainingData& data,
                                       Communicator& comm, const torch::Device& device,
                                       std::function<bool()> stop_requested, const RunStart* start) {
  std::optional<RunStart> opened;
  if (start == nullptr) start = &opened.emplace(open_run_start(given_flags));
  const Parsed<TrainFlags> flags = resumed_flags(given_flags, *start);  // the same again where train took them
  const TrainFlags& f = flags.config;
  const GptConfig model_config = resolve_model_config(flags, data.vocab_size, *start);
  require_data_fits_model(data, *start, model_config.vocab_size);
  const RunTokenizer tokenizer = run_tokenizer(data, *start);
  TrainOptions options = resolve_train_options(flags, model_config, device, comm.world_size());
  std::vector<std::string> cuda_only_flags;
  if (flags.gave("attention") && options.attention != AttentionBackend::automatic &&
      options.attention != AttentionBackend::math) {
    for (const auto& [name, backend] : attention_backend_names()) {
      if (backend == options.attention) cuda_only_flags.push_back("--attention " + name);
    }
  }
  if (flags.gave("cuda-loss-kernel") && options.cuda_loss_kernel) cuda_only_flags.push_back("--cuda-loss-kernel");
  if (flags.gave("cuda-norm-kernel") && options.cuda_norm_kernel) cuda_only_flags.push_back("--cuda-norm-kernel");
  refuse_cuda_only_flags(device, cuda_only_flags);
  if (options.peak_tflops == 0 && device.is_cuda()) options.peak_tflops = known_peak_tflops(device_name(device));
  require_memory_for_run(model_config, options, comm.world_size(), device,
                         keeps_freed_memory(f.runtime.keep_freed_memory));
  if (comm.rank() == 0) require_disk_for_checkpoints(model_config, options, *start);
  RunOutput output = RunOutput::for_rank(comm.rank(), options.out);
  if (options.warmup_steps != f.train.warmup_steps) {
    output.print("note: the default warm-up of " + std::to_string(f.train.warmup_steps) + " steps is longer than the " +
                 std::to_string(options.steps) + "-step run; warming up for " + std::to_string(options.warmup_steps));
  }
  std::optional<std::string> stored_options;  // the run a resumed checkpoint continues
  if (start->resume) stored_options = start->model->checkpoint->meta.run_config;
  const auto tokens_per_step = static_cast<uint64_t>(options.batch_size * options.seq_len * options.grad_accum) *
                               static_cast<uint64_t>(comm.world_size());
  TrainerParts parts;
  parts.device = device;
  ChosenDataOrder order;
  if (data.chat && f.data.packing == Packing::best_fit) {
    throw std::invalid_argument("--packing best-fit packs the documents of token data; --sft gives each conversation "
                                "rows of its own: leave out --packing");
  }
  if (data.chat) {
    order.order = add_conversation_loaders(*data.chat, options, f.data.data_order, comm, output, parts);
  } else if (f.data.packing == Packing::best_fit) {
    order.order = DataOrder::sequential;  // documents in order
    parts.train_loader = make_batch_loader(order.order, data.train, options.batch_size, options.seq_len, options.seed,
                                           comm.rank(), comm.world_size(), Packing::best_fit,
                                           best_fit_delimiter(tokenizer, f.data.data_order));
  } else {
    order = choose_data_order(f.data.data_order, stored_options, data.train->size(),
                              tokens_per_step * static_cast<uint64_t>(options.steps));
    if (!order.note.empty()) output.print(order.note);
    parts.train_loader = make_batch_loader(order.order, data.train, options.batch_size, options.seq_len, options.seed,
                                           comm.rank(), comm.world_size());
  }
  if (data.val && data.val->size() > static_cast<uint64_t>(options.batch_size * options.seq_len)) {
    parts.val_loader = std::make_unique<ShardedBatchLoader>(data.val, options.batch_size, options.seq_len, comm.rank(),
                                                            comm.world_size());
    parts.val_vocab_limit = tokens_in_vocabulary(tokenizer.kind, model_config.vocab_size);
    if (tokenizer.kind != TokenizerKind::none) {
      parts.val_bpb.emplace(make_text_codec(tokenizer.kind, tokenizer.data)->token_byte_counts(),
                            model_config.vocab_size, device);
    }
    const std::string note = validation_batches(options.eval_steps, *parts.val_loader).note;
    if (options.eval_every > 0 && !note.empty()) output.print(note);
  } else if (options.eval_every > 0 && !data.chat) {  // conversations: held out above
    output.print("note: no validation data of at least one batch; validation loss is off");
  }
  parts.hellaswag = load_hellaswag(f.data, tokenizer, options.hellaswag_examples);
  if (f.data.core) {
    if (tokenizer.kind == TokenizerKind::none) {
      throw std::invalid_argument("--core needs a tokenizer, and this token data has none: give --vocab DIR");
    }
    parts.core = read_core_bundle(*f.data.core);
    for (const std::string& note : core_fewshot_notes(*parts.core, options.core_max_per_task)) output.print(note);
    parts.core_codec = make_text_codec(tokenizer.kind, tokenizer.data);
    parts.core_vocab_limit = tokens_in_vocabulary(tokenizer.kind, model_config.vocab_size);
  }

  // The kernel is the default on CUDA (measured: docs/gpu-runs/2026-11-26-h100); a binary built without nvcc
  // runs the ATen loss instead, and refuses only a run that asked for the kernel by name (below).
  const bool kernel_missing = options.cuda_loss_kernel && device.is_cuda() && !lm_loss_cuda_kernel_built();
  // The LayerNorm kernel is the default on CUDA too (8.6% less time per GPT-2 step on an H100,
  // docs/gpu-runs/2026-11-27-h100-2); without nvcc the blocks keep ATen's LayerNorm.
  const bool norm_kernel_missing = options.cuda_norm_kernel && device.is_cuda() && !layer_norm_cuda_kernel_built();
  const GptRuntime runtime{
      .fused_loss = options.fused_loss,
      .loss = {.chunk_rows = options.loss_chunk_rows, .cuda_kernel = options.cuda_loss_kernel && !kernel_missing},
      .recompute = options.recompute,
      .cuda_norm_kernel = options.cuda_norm_kernel && device.is_cuda() && !norm_kernel_missing};
  seed_everything(options.seed);
  parts.model = Gpt(model_config, runtime);
  if (start->model && !start->resume) {
    if (comm.rank() == 0) copy_stored_weights(*start->model, parts.model);
    output.print("weights: " + start->model->description + " (optimizer, step and data position start fresh)");
    // A model whose file has no rows for the chat tokens (Hugging Face's GPT-2 of 50257) was built padded
    // (above) and loaded with those rows zero; they start as the mean of the known ones instead.
    const int64_t known_rows = start->model->config.vocab_size;
    if (data.chat && data.chat->ids_end > known_rows) {
      if (comm.rank() == 0) set_new_token_rows_to_mean(parts.model, known_rows, data.chat->ids_end);
      output.print(strprintf("vocabulary: grew the model's %lld token rows to %lld (a multiple of 64); the chat tokens "
                             "%lld..%lld start as the mean of its token embeddings",
                             static_cast<long long>(known_rows), static_cast<long long>(model_config.vocab_size),
                             static_cast<long long>(known_rows), static_cast<long long>(data.chat->ids_end - 1)));
    }
  }
  if (kernel_missing && flags.gave("cuda-loss-kernel")) {
    throw std::invalid_argument("--cuda-loss-kernel: this binary was built without nvcc, so it has no CUDA loss kernel");
  }
  if (kernel_missing) {
    output.print("note: this binary was built without nvcc: the fused loss runs as ATen ops, not the CUDA loss kernel");
  }
  if (norm_kernel_missing && flags.gave("cuda-norm-kernel")) {
    throw std::invalid_argument("--cuda-norm-kernel: this binary was built without nvcc, so it has no CUDA LayerNorm "
                                "kernel");
  }
  prefer_attention_backend(options.attention, device);
  parts.model->to(device);
  broadcast_model_state(*parts.model, comm);  // every rank starts from rank 0's weights
  // Each rank's dropout masks from its own stream (as nanoGPT seeds 1337 + rank): with one stream for all,
  // every rank drew the masks rank 0 drew, for other rows. Rank 0 keeps the seed's stream, so one rank
  // trains as before; a resume restores each rank's saved stream over this.
  if (comm.rank() > 0) seed_everything(options.seed + static_cast<uint64_t>(comm.rank()));
  const AdamWOptions adamw{options.lr, options.beta1, options.beta2, options.eps, options.weight_decay};
  if (options.optimizer == OptimizerKind::muon) {
    MuonSplit split = split_for_muon(parts.model);
    parts.optimizer = std::make_unique<AdamW>(std::move(split.adamw_decay), std::move(split.adamw_no_decay), adamw);
    parts.muon = std::make_unique<Muon>(std::move(split.muon),
                                        MuonOptions{options.muon_lr, options.muon_momentum, options.muon_nesterov,
                                                    options.muon_ns_steps, options.muon_weight_decay},
                                        comm);
  } else if (options.zero == 0) {
    // With --zero 1 the Trainer builds the sharded AdamW over its gradient buckets instead.
    parts.optimizer =
        std::make_unique<AdamW>(parts.model->decay_parameters(), parts.model->no_decay_parameters(), adamw);
  }

  TrainFlags resolved = f;
  resolved.train = options;
  resolved.data.data_order = order.order;
  parts.checkpoint_meta =
      CheckpointMeta{model_config, tokenizer.kind, tokenizer.data, 0, train_flag_table().to_text(resolved),
                     data.chat ? data.chat->format_record : std::string()};
  if (stored_options) {
    if (const std::string changes = resume_changes(*stored_options, parts.checkpoint_meta.run_config); !changes.empty())
      output.print(changes);
  }
  parts.peak_memory_mib = [device] { return peak_memory_mib(device); };
  parts.sample = make_sampler(options, tokenizer, device, stop_requested);
  parts.stop_requested = std::move(stop_requested);
  if (auto at_step = injected_overflows(comm.rank())) {
    inject_overflows(parts.model, std::move(at_step), start->resume ? start->model->checkpoint->meta.step : 0,
                     options.grad_accum);
  }
  return std::make_unique<Trainer>(std::move(parts), options, comm, std::move(output));
}

}  // namespace mygpt
