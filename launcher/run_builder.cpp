#include "launcher/run_builder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>

#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/file_io.h"
#include "common/strprintf.h"
#include "dataloader/chat_batch_loader.h"
#include "dataloader/chat_data.h"
#include "eval/core_bundle.h"
#include "eval/hellaswag_reader.h"
#include "distributed/gradient_sync.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "model/attention_backend.h"
#include "model/new_token_rows.h"
#include "model/sampling.h"
#include "trainer/checkpoint.h"
#include "trainer/injected_overflow.h"
#include "eval/validation_batches.h"

namespace mygpt {
namespace {

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

// Fine-tuning's loaders over conversations cut to this run's rows: the training ones in the plan's order
// (shuffled each epoch from --seed, or sequential), the held-out ones in their order.
void add_conversation_loaders(const ChatData& chat, const TrainOptions& o, DataOrder order, const Communicator& comm,
                              const RunOutput& output, TrainerParts& parts) {
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
  if (!chat.val) {
    if (o.eval_every > 0) output.print("note: no held-out conversations; validation loss is off");
    return;
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
    return;
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
}

// --zero 1 reduce-scatters whole gradient buckets, --zero 2 keeps only this rank's shard of them.
GradientSharding gradient_sharding(int64_t zero) {
  return zero == 0 ? GradientSharding::none : zero == 1 ? GradientSharding::reduce_scatter : GradientSharding::shard_only;
}

}  // namespace

std::unique_ptr<Trainer> build_trainer(const RunPlan& plan, const TrainingData& data, Communicator& comm,
                                       const torch::Device& device, std::function<bool()> stop_requested,
                                       const RunStart& start) {
  const TrainOptions& options = plan.train;
  const GptConfig& model_config = plan.model;
  const RunTokenizer& tokenizer = plan.tokenizer;
  RunOutput output = RunOutput::for_rank(comm.rank(), options.out);
  if (!plan.notes.batch.empty()) output.print(plan.notes.batch);
  if (!plan.notes.warmup.empty()) output.print(plan.notes.warmup);
  TrainerParts parts;
  parts.device = device;
  if (data.chat) {
    add_conversation_loaders(*data.chat, options, plan.data_order, comm, output, parts);
    // The rows a stored chat model counts as tokens (launcher/inference_model.h's token_count), which `eval`
    // and the exported model score over too: the tokenizer's rows (an HF tokenizer's model: all of them) and
    // the chat tokens'.
    parts.val_vocab_limit =
        std::max(tokens_in_vocabulary(tokenizer.kind, model_config.vocab_size), data.chat->ids_end);
  } else if (plan.data.packing == Packing::best_fit) {
    if (!plan.notes.packing.empty()) output.print(plan.notes.packing);
    parts.train_loader = make_batch_loader(plan.data_order, data.train, options.batch_size, options.seq_len, options.seed,
                                           comm.rank(), comm.world_size(), Packing::best_fit, plan.document_delimiter);
  } else {
    if (!plan.notes.data_order.empty()) output.print(plan.notes.data_order);
    parts.train_loader = make_batch_loader(plan.data_order, data.train, options.batch_size, options.seq_len, options.seed,
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
  parts.hellaswag = load_hellaswag(plan.data, tokenizer, options.hellaswag_examples);
  if (plan.data.core) {
    if (tokenizer.kind == TokenizerKind::none) {
      throw std::invalid_argument("--core needs a tokenizer, and this token data has none: give --vocab DIR");
    }
    parts.core = read_core_bundle(*plan.data.core);
    for (const std::string& note : core_fewshot_notes(*parts.core, options.core_max_per_task)) output.print(note);
    parts.core_codec = make_text_codec(tokenizer.kind, tokenizer.data);
    parts.core_vocab_limit = tokens_in_vocabulary(tokenizer.kind, model_config.vocab_size);
  }

  const GptRuntime runtime{.fused_loss = options.fused_loss,
                           .loss = {.chunk_rows = options.loss_chunk_rows, .cuda_kernel = plan.cuda_loss_kernel},
                           .recompute = options.recompute,
                           .cuda_norm_kernel = plan.cuda_norm_kernel};
  seed_everything(options.seed);
  // --zero 3: the model is never whole on a rank. Built without memory, sharded across the ranks at once,
  // and each rank writes only its piece of each parameter: the values a --zero 0 run starts with, drawn
  // one parameter at a time from the same seed in the same order (which also leaves the generator where a
  // --zero 0 run's is), or the stored model's, read tensor by tensor.
  const bool sharded = options.zero == 3;
  const bool from_stored = start.model && !start.resume;
  parts.model = Gpt(model_config, sharded ? WeightInit::unallocated : WeightInit::random, runtime);
  if (sharded) {
    parts.fully_sharded = std::make_unique<FullyShardedModel>(parts.model, comm, device);
    parts.model->for_each_initial_value([&](const std::string& name, const torch::Tensor& value) {
      if (!from_stored) parts.fully_sharded->set_parameter(name, value);
    });
  }
  if (from_stored) {
    // A model whose file has no rows for the chat tokens (Hugging Face's GPT-2 of 50257) was built padded
    // (above) and loaded with those rows zero; they start as the mean of the known ones instead.
    const int64_t known_rows = start.model->config.vocab_size;
    const bool grow = data.chat && data.chat->ids_end > known_rows;
    if (sharded) {
      for_each_stored_weight(*start.model, parts.model, [&](const std::string& name, const torch::Tensor& value) {
        if (!grow || (name != "wte.weight" && name != "lm_head.weight")) return parts.fully_sharded->set_parameter(name, value);
        torch::Tensor grown = value.clone();
        set_new_token_rows_to_mean(grown, known_rows, data.chat->ids_end);
        parts.fully_sharded->set_parameter(name, grown);
      });
    } else if (comm.rank() == 0) {
      copy_stored_weights(*start.model, parts.model);
      if (grow) set_new_token_rows_to_mean(parts.model, known_rows, data.chat->ids_end);
    }
    output.print("weights: " + start.model->description + " (optimizer, step and data position start fresh)");
    if (grow) {
      output.print(strprintf("vocabulary: grew the model's %lld token rows to %lld (a multiple of 64); the chat tokens "
                             "%lld..%lld start as the mean of its token embeddings",
                             static_cast<long long>(known_rows), static_cast<long long>(model_config.vocab_size),
                             static_cast<long long>(known_rows), static_cast<long long>(data.chat->ids_end - 1)));
    }
  }
  if (!plan.notes.loss_kernel.empty()) output.print(plan.notes.loss_kernel);
  prefer_attention_backend(options.attention, device);
  parts.model->to(device);  // --zero 3's parameters are there already, as views of its units
  if (!sharded) broadcast_model_state(*parts.model, comm);  // every rank starts from rank 0's weights
  // Each rank's dropout masks from its own stream (as nanoGPT seeds 1337 + rank): with one stream for all,
  // every rank drew the masks rank 0 drew, for other rows. Rank 0 keeps the seed's stream, so one rank
  // trains as before; a resume restores each rank's saved stream over this.
  if (comm.rank() > 0) seed_everything(options.seed + static_cast<uint64_t>(comm.rank()));

  // The optimizer, in every case: AdamW over the model's two groups (with --zero 1, 2 or 3 over this rank's
  // shard), Muon beside it for the blocks' matrices; and the schedule they follow.
  const AdamWOptions adamw{options.lr, options.beta1, options.beta2, options.eps, options.weight_decay};
  // AdamW's two groups: the model's, or with Muon what Muon leaves (with --zero sharded, below).
  std::vector<torch::Tensor> adamw_decay = parts.model->decay_parameters();
  std::vector<torch::Tensor> adamw_no_decay = parts.model->no_decay_parameters();
  if (options.optimizer == OptimizerKind::muon) {
    MuonSplit split = split_for_muon(parts.model);
    adamw_decay = std::move(split.adamw_decay);
    adamw_no_decay = std::move(split.adamw_no_decay);
    if (options.zero == 0) parts.optimizer = std::make_unique<AdamW>(adamw_decay, adamw_no_decay, adamw);
    parts.muon = std::make_unique<Muon>(std::move(split.muon),
                                        MuonOptions{options.muon_lr, options.muon_momentum, options.muon_nesterov,
                                                    options.muon_ns_steps, options.muon_weight_decay},
                                        comm);
  } else if (options.zero == 0) {
    parts.optimizer =
        std::make_unique<AdamW>(parts.model->decay_parameters(), parts.model->no_decay_parameters(), adamw);
  }
  parts.schedule = LrSchedule{options.lr, options.min_lr.value(), options.warmup_steps, options.steps};

  parts.checkpoint_meta =
      CheckpointMeta{model_config, tokenizer.kind, tokenizer.data, 0, train_flag_table().to_text(plan.resolved_flags()),
                     data.chat ? data.chat->format_record : std::string()};
  if (plan.stored_options) {
    if (const std::string changes = resume_changes(*plan.stored_options, parts.checkpoint_meta.run_config);
        !changes.empty())
      output.print(changes);
  }
  parts.peak_memory_mib = [device] { return peak_memory_mib(device); };
  // --zero 3: every rank runs the sample's forwards (each gathers the units), so no rank may cut it short alone.
  parts.sample = make_sampler(options, tokenizer, device, options.zero == 3 ? std::function<bool()>{} : stop_requested);
  parts.stop_requested = std::move(stop_requested);
  if (options.time_budget) parts.budget_clock = time_budget_clock(comm.rank());  // a test's, or the steady clock
  if (auto at_step = injected_overflows(comm.rank())) {
    inject_overflows(parts.model, std::move(at_step), start.resume ? start.model->checkpoint->meta.step : 0,
                     options.grad_accum);
  }
  // The gradient buckets (and with --zero 1 or 2 the AdamW of this rank's shard of them; with --zero 3 the
  // model's units sharded instead, and the AdamW of this rank's shard of them) last: over the model
  // as it is on the device.
  if (sharded) {
    parts.zero = std::make_unique<ShardedAdamW>(parts.model->parameters(), adamw_decay, adamw_no_decay,
                                                parts.fully_sharded->runs(), adamw, comm);
    if (parts.muon) parts.muon->use_sharded_gradients(*parts.zero);
    return std::make_unique<Trainer>(std::move(parts), options, comm, std::move(output));
  }
  parts.grad_sync = std::make_unique<GradientSynchronizer>(parts.model->parameters(), comm,
                                                           static_cast<size_t>(options.bucket_mb * (1 << 20)),
                                                           options.ddp_overlap, gradient_sharding(options.zero));
  if (options.zero > 0) {
    parts.zero = std::make_unique<ShardedAdamW>(parts.model->parameters(), adamw_decay, adamw_no_decay,
                                                *parts.grad_sync, adamw, comm);
    if (parts.muon) parts.muon->use_sharded_gradients(*parts.zero);
  }
  return std::make_unique<Trainer>(std::move(parts), options, comm, std::move(output));
}

}  // namespace mygpt
