#include "launcher/train_flags.h"

#include <unistd.h>

#include <filesystem>
#include <limits>
#include <stdexcept>
#include <thread>

#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/model_flags.h"
#include "launcher/shared_flags.h"

namespace mygpt {
namespace {

// --profile's file: its folder must exist and take a file (checked before training starts, not at step 10).
void profile_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path file(path);
  if (std::filesystem::is_directory(file)) throw std::invalid_argument("--" + flag + " " + path + " is a folder, not a file");
  const std::filesystem::path folder = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(folder)) {
    throw std::invalid_argument("--" + flag + " " + path + ": folder " + folder.string() + " does not exist");
  }
  if (access(folder.c_str(), W_OK) != 0) {
    throw std::invalid_argument("--" + flag + " " + path + ": folder " + folder.string() + " is not writable");
  }
}

OptionTable<TrainFlags> make_table() {
  using F = TrainFlags;
  using D = DataOptions;
  using T = TrainOptions;
  using R = RuntimeOptions;
  OptionTable<F> t;
  t.group("Data");
  t.add("data", &F::data, &D::data,
        "training data (also the first positional argument): builtin:sort (generated offline), a UTF-8 text "
        "file, a token file (llm.c .bin, .npy uint16, raw uint16), a folder of shards or a glob")
      .init("builtin:sort")
      .read_by(kPlanCommand);
  t.positional("data", 1);
  t.add("val-data", &F::data, &D::val_data, "validation token data; a shard folder's *val* files otherwise")
      .read_by(kPlanCommand);
  t.add("tokenizer", &F::data, &D::tokenizer,
        "tokenizer of text data; when not given: the BPE of --vocab's folder (or of --init-from's), hf where it "
        "has a tokenizer.json and gpt2 where it has GPT-2's files, "
        "else char")
      .names({{"char", TokenizerKind::character}, {"gpt2", TokenizerKind::gpt2}, {"hf", TokenizerKind::hf}})
      .init(TokenizerKind::character)
      .read_by(kPlanCommand);
  vocab_flag(t, &F::data, &D::vocab).read_by(kPlanCommand);
  t.add("vocab-size", &F::data, &D::vocab_size,
        "model vocabulary of token data (unset: GPT-2's 50304, or the char_vocab.txt beside the shards)")
      .check(positive)
      .read_by(kPlanCommand);
  t.add("val-fraction", &F::data, &D::val_fraction, "share of a text used for validation (its end)")
      .init(0.1)
      .check(in_range(0, 1, /*hi_inclusive=*/false))
      .read_by(kPlanCommand);
  t.add("data-order", &F::data, &D::data_order,
        "auto: shuffled when the run reads its training data more than once, else sequential; sequential: "
        "consecutive chunks sharded across ranks; shuffled: rows of --seq-len tokens in a fresh order each epoch "
        "(from --seed), sharded likewise; random: random offsets per rank (nanoGPT's get_batch)")
      .names({{"auto", DataOrder::automatic},
              {"sequential", DataOrder::sequential},
              {"shuffled", DataOrder::shuffled},
              {"random", DataOrder::random}})
      .init(DataOrder::automatic);
  t.add("packing", &F::data, &D::packing,
        "rows: consecutive --seq-len tokens wherever they fall in the documents (--data-order); best-fit: every row "
        "starts at a document's first token (the tokenizer's BOS / <|endoftext|> that prepare writes), documents "
        "placed best-fit into rows and what does not fit cropped (nanochat's packing; documents read in order; the "
        "share cropped is printed); validation keeps rows")
      .names({{"rows", Packing::rows}, {"best-fit", Packing::best_fit}})
      .init(Packing::rows);
  t.add("sft", &F::data, &D::sft,
        "supervised fine-tuning: DATA (and --val-data) are conversations in JSON lines ({\"messages\": [{\"role\": "
        "\"system\"|\"user\"|\"assistant\", \"content\": ...}]} or {\"prompt\": ..., \"completion\": ...}); the "
        "loss is the mean over the assistant's tokens of each step")
      .init(false)
      .read_by(kPlanCommand);
  t.add("skip-bad-records", &F::data, &D::skip_bad_records,
        "with --sft: skip bad records (counted in one note) instead of stopping at the first")
      .init(false);
  t.add("hellaswag", &F::data, &D::hellaswag,
        "HellaSwag file (official jsonl or llama.cpp's 6-line text); needs --vocab");
  t.add("core", &F::data, &D::core,
        "nanochat's CORE metric during training, over an unzipped eval bundle (core.yaml, eval_meta_data.csv, "
        "eval_data/); needs a tokenizer");

  add_model_flags(t);  // launcher/model_flags.cpp: a row per model config field

  t.group("Training (the recipe values of presets in brackets)");
  t.add("steps", &F::train, &T::steps, "optimizer steps")
      .init(2000)
      .recipe("gpt2", 19073)
      .recipe("shakespeare-char", 5000)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("batch-size", &F::train, &T::batch_size, "micro-batch rows per rank")
      .init(16)
      .recipe("shakespeare-char", 64)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("seq-len", &F::train, &T::seq_len, "tokens per row; 0 means the model's block size")
      .init(0)
      .recipe("gpt2", 1024)
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("grad-accum", &F::train, &T::grad_accum, "micro-batches accumulated per optimizer step and rank")
      .init(1)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("total-batch-tokens", &F::train, &T::total_batch_tokens,
        "tokens per optimizer step over all ranks; sets --grad-accum (must divide evenly); 0: off")
      .init(0)
      .recipe("gpt2", 524288)
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("lr", &F::train, &T::lr, "peak learning rate")
      .init(1e-3)
      .recipe("gpt2", 6e-4)
      .recipe("shakespeare-char", 1e-3)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("min-lr", &F::train, &T::min_lr,
        "learning rate at the end of the cosine decay; not given: a tenth of --lr (as build-nanogpt and nanoGPT)")
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("warmup-steps", &F::train, &T::warmup_steps, "linear warmup steps; a run shorter than the default (not given) warms up for a tenth of its --steps, and a value given must not exceed --steps")
      .init(100)
      .recipe("gpt2", 715)
      .recipe("shakespeare-char", 100)
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("weight-decay", &F::train, &T::weight_decay, "AdamW weight decay on 2-D weights").init(0.1).check(non_negative);
  t.add("beta1", &F::train, &T::beta1, "AdamW's first-moment decay").init(0.9).check(in_range(0, 1, false));
  t.add("beta2", &F::train, &T::beta2, "AdamW's second-moment decay")
      .init(0.95)
      .recipe("shakespeare-char", 0.99)
      .check(in_range(0, 1, false));
  t.add("eps", &F::train, &T::eps, "AdamW's denominator epsilon").init(1e-8).check(positive);
  t.add("optimizer", &F::train, &T::optimizer,
        "adamw: AdamW for every parameter; muon: Muon (momentum orthogonalized by Newton-Schulz) for the 2-D "
        "weights inside the blocks, AdamW (--lr, --weight-decay, --beta1/2) for embeddings, head, biases, gains")
      .names({{"adamw", OptimizerKind::adamw}, {"muon", OptimizerKind::muon}})
      .init(OptimizerKind::adamw);
  t.add("muon-lr", &F::train, &T::muon_lr, "Muon's peak learning rate (same warmup and decay as --lr)")
      .init(0.02)
      .check(positive);
  t.add("muon-momentum", &F::train, &T::muon_momentum, "Muon's momentum").init(0.95).check(in_range(0, 1, false));
  t.add("muon-nesterov", &F::train, &T::muon_nesterov, "Nesterov momentum in Muon").init(true);
  t.add("muon-ns-steps", &F::train, &T::muon_ns_steps, "Newton-Schulz iterations per Muon update")
      .init(5)
      .check(positive);
  // GPT-2's value: KellerJordan/Muon's example for a GPT-2-like model (lr 0.02, weight decay 0.01).
  t.add("muon-weight-decay", &F::train, &T::muon_weight_decay, "Muon's decoupled weight decay")
      .init(0.0)
      .recipe("gpt2", 0.01)
      .check(non_negative);
  t.add("grad-clip", &F::train, &T::grad_clip, "clip the global gradient norm; 0 disables")
      .init(1.0)
      .check(non_negative);
  t.add("max-bad-steps", &F::train, &T::max_bad_steps,
        "a step whose loss or gradient norm is not finite is skipped; this many in a row stop the run with a "
        "checkpoint of the last good weights (exit 1)")
      .init(10)
      .check(positive);
  t.add("fused-loss", &F::train, &T::fused_loss,
        "compute the output head and cross-entropy in chunks of rows, never holding all logits (false: the plain "
        "loss, for comparison)")
      .init(true)
      .read_by(kPlanCommand)
      .of_process();
  t.add("loss-chunk-rows", &F::train, &T::loss_chunk_rows,
        "rows per chunk of the fused loss; 0 sizes chunks by device (about 64 MiB of fp32 logits on a CPU, 1 GiB "
        "on a GPU)")
      .init(0)
      .check(non_negative)
      .read_by(kPlanCommand)
      .of_process();
  t.add("cuda-loss-kernel", &F::train, &T::cuda_loss_kernel,
        "on CUDA, one fused kernel per chunk of the fused loss computes softmax, loss and gradient in place, and "
        "the head's fp32 weight gradient is accumulated by the 16-bit matmul itself (false: ATen ops; CPUs always "
        "use those)")
      .init(true)
      .of_process();
  t.add("cuda-norm-kernel", &F::train, &T::cuda_norm_kernel,
        "on CUDA under bf16/fp16, each LayerNorm writes its 16-bit output directly and its backward computes "
        "the input, weight and bias gradients in one pass (false: ATen's fp32 LayerNorm and the casts around "
        "it; CPUs always use ATen's)")
      .init(true)
      .of_process();
  t.add("attention", &F::train, &T::attention,
        "preferred attention kernel (LibTorch's scaled_dot_product_attention); where it cannot run the next "
        "in PyTorch's order runs; math: the reference kernel only")
      .names(attention_backend_names())
      .init(AttentionBackend::automatic)
      .of_process();
  t.add("recompute", &F::train, &T::recompute,
        "activations recomputed in backward instead of kept: none, mlp (each block's MLP: its 4x-wide GELU input "
        "and output) or block (all of each block; only its input is kept). Less memory, one more forward of that "
        "part; the same losses and gradients")
      .names({{"none", Recompute::none}, {"mlp", Recompute::mlp}, {"block", Recompute::block}})
      .init(Recompute::none)
      .read_by(kPlanCommand)
      .of_process();
  precision_flag(t, &F::train, &T::precision).read_by(kPlanCommand).of_process();  // follows the device
  t.add("loss-scale-init", &F::train, &T::loss_scale_init,
        "fp16: the loss is multiplied by this before backward so small gradients survive fp16; it halves at "
        "each overflow (that step is skipped) and doubles after --loss-scale-growth-interval good steps")
      .init(65536.0)
      .check(in_range(1, 3.4e38, true));
  t.add("loss-scale-growth-interval", &F::train, &T::loss_scale_growth_interval,
        "fp16: good steps in a row before the loss scale doubles")
      .init(2000)
      .check(positive);
  seed_flag(t, &F::train, &T::seed);

  t.group("Run");
  device_flag(t, &F::runtime, &R::device).read_by(kPlanCommand).of_process();
  threads_flag(t, &F::runtime, &R::threads).of_process();
  t.add("out", &F::train, &T::out, "output folder: checkpoints, metrics.jsonl")
      .init("out")
      .check(not_empty)
      .read_by(kPlanCommand)
      .of_process();
  t.add("profile", &F::train, &T::profile,
        "write a trace of --profile-steps steps (CPU operators; CUDA kernels on a GPU) to this file, taken "
        "after the first 10 steps; open it at ui.perfetto.dev or sum it with scripts/profile_summary.py")
      .init("")
      .check(profile_file)
      .of_process();
  t.add("profile-steps", &F::train, &T::profile_steps, "steps traced by --profile")
      .init(3)
      .check(positive)
      .of_process();
  t.add("resume", &F::runtime, &R::resume,
        "auto (newest intact checkpoint in --out, if any) or a checkpoint path; empty starts afresh. A resumed run "
        "takes every option of the run from its checkpoint unless given again (not those of the process: device, "
        "threads, precision, out, kernels, logging)")
      .init("")
      .read_by(kPlanCommand)
      .of_process();
  t.add("overwrite", &F::runtime, &R::overwrite,
        "a fresh run into an --out holding an earlier run deletes that run's files (ckpt_*, metrics.jsonl, "
        "run.json; nothing else) instead of refusing to start")
      .init(false)
      .of_process();
  t.add("checkpoint-every", &F::train, &T::checkpoint_every,
        "checkpoint every N steps and at the end; 0: only at the end; not given: at each evaluation (every "
        "--eval-every steps, as nanoGPT), so that a killed run loses little")
      .recipe("gpt2", 5000)
      .check(non_negative)
      .read_by(kPlanCommand);  // plan prints the checkpoints' disk need (trainer/checkpoint_space.h)
  t.add("keep-checkpoints", &F::train, &T::keep_checkpoints,
        "keep only the newest N checkpoints; 0 keeps all; not given: all when --checkpoint-every is set, else (the "
        "checkpoints at each evaluation) the newest 2: the newest, and one to fall back to should it be damaged")
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("final-checkpoint", &F::train, &T::final_checkpoint,
        "write a checkpoint when the last step is done (false: a benchmark, where GPT-2's would be 1.5 GB)")
      .init(true)
      .read_by(kPlanCommand);
  t.add("eval-every", &F::train, &T::eval_every, "validation loss every N steps and at the last step; 0 disables")
      .init(250)
      .check(non_negative)
      .read_by(kPlanCommand);  // without --checkpoint-every it is the checkpoints' cadence, which plan sizes
  t.add("eval-steps", &F::train, &T::eval_steps, "validation batches of --batch-size rows per evaluation, all ranks together (split across them); at most what the validation data holds")
      .init(20)
      .recipe("shakespeare-char", 200)
      .check(positive);
  t.add("hellaswag-every", &F::train, &T::hellaswag_every, "HellaSwag every N steps when --hellaswag is given")
      .init(250)
      .check(non_negative);
  t.add("hellaswag-examples", &F::train, &T::hellaswag_examples, "examples per HellaSwag evaluation; 0 means all")
      .init(0)
      .check(non_negative);
  t.add("core-every", &F::train, &T::core_every, "CORE every N steps when --core is given")
      .init(2000)
      .check(non_negative);
  t.add("core-max-per-task", &F::train, &T::core_max_per_task,
        "CORE items per task per evaluation (nanochat's training uses 500); 0 means all")
      .init(500)
      .check(non_negative);
  t.add("sample-every", &F::train, &T::sample_every, "rank 0 prints a sample every N steps; 0 disables")
      .init(0)
      .check(non_negative);
  t.add("sample-prompt", &F::train, &T::sample_prompt, "prompt of those samples (the default is one newline, as nanoGPT's samples start)")
      .init("\n")
      .check(not_empty)
      .check(utf8_text);
  t.add("sample-tokens", &F::train, &T::sample_tokens, "tokens per sample").init(64).check(positive);
  t.add("log-every", &F::train, &T::log_every, "print a progress line every N steps").init(10).check(positive)
      .of_process();
  t.add("peak-tflops", &F::train, &T::peak_tflops,
        "the device's peak TFLOP/s for MFU; 0 looks the GPU up in a table (unknown: n/a)")
      .init(0.0)
      .check(non_negative)
      .of_process();
  t.add("bucket-mb", &F::train, &T::bucket_mb, "DDP gradient bucket size in MiB")
      .init(25.0)
      .check(positive)
      .read_by(kPlanCommand)
      .of_process();
  t.add("ddp-overlap", &F::train, &T::ddp_overlap,
        "start each bucket's all-reduce during backward (false: all after backward)")
      .init(true)
      .of_process();
  t.add("zero", &F::train, &T::zero,
        "ZeRO stage: 1 shards AdamW's state across ranks (each keeps 1/N; gradients reduce-scattered, "
        "parameters all-gathered; checkpoints stay whole); 0: every rank holds all of it")
      .init(0)
      .check([](const std::string& flag, const int64_t& v) {
        if (v != 0 && v != 1) throw std::invalid_argument("--" + flag + " must be 0 or 1, got " + std::to_string(v));
      })
      .read_by(kPlanCommand)
      .of_process();
  comm_timeout_flag(t, &F::runtime, &R::comm_timeout).of_process();
  t.add("verbose", &F::runtime, &R::verbose,
        "also print LibTorch's own warnings while the ranks meet (c10d's connection retries, with stack traces); "
        "without it a failed rendezvous prints one line")
      .init(false)
      .of_process();
  t.add("keep-freed-memory", &F::runtime, &R::keep_freed_memory,
        "CPU: malloc keeps the memory a step frees for the next instead of returning it to the kernel (no page "
        "faults per step; about one of the step's largest blocks more peak RSS, which plan counts); false: "
        "glibc's defaults; MALLOC_* variables and glibc.malloc tunables override it")
      .init(true)
      .read_by(kPlanCommand)
      .of_process();
  rendezvous_flag(t, &F::runtime, &R::rendezvous).of_process();

  using P = PlanOptions;
  t.group(std::string(kPlanOnlyGroup));
  t.add("ranks", &F::plan, &P::ranks, "ranks to plan for; 0: the world size under a launcher, else 1")
      .init(0)
      .check(non_negative)
      .read_by(kPlanCommand)
      .of_process();
  t.add("gpu-memory", &F::plan, &P::gpu_memory,
        "GiB of memory per GPU to check the estimate against (and find the largest micro-batch that fits); 0: "
        "the GPU's own with --device cuda")
      .init(0.0)
      .check(non_negative)
      .read_by(kPlanCommand)
      .of_process();
  // GPT-2's recipe (build-nanogpt) for the gpt2 presets; nanoGPT's config/train_shakespeare_char.py.
  t.recipe_of(
      [](const TrainFlags& f) { return is_gpt2_preset(f.model.preset) ? std::string("gpt2") : f.model.preset; });
  return t;
}

}  // namespace

const OptionTable<TrainFlags>& train_flag_table() {
  static const OptionTable<TrainFlags> table = make_table();
  return table;
}

TrainOptions resolve_train_options(const Parsed<TrainFlags>& flags, const GptConfig& model, const torch::Device& device,
                                   int world_size) {
  TrainOptions o = flags.config.train;
  if (o.eval_every == 0) flags.refuse("eval-steps", "with --eval-every 0");
  if (!flags.config.data.hellaswag) {
    flags.refuse("hellaswag-every", "without --hellaswag");
    flags.refuse("hellaswag-examples", "without --hellaswag");
  }
  if (!flags.config.data.core) {
    flags.refuse("core-every", "without --core");
    flags.refuse("core-max-per-task", "without --core");
  }
  if (o.sample_every == 0) {
    flags.refuse("sample-prompt", "with --sample-every 0");
    flags.refuse("sample-tokens", "with --sample-every 0");
  }
  if (o.optimizer != OptimizerKind::muon) {
    for (const char* muon_flag : {"muon-lr", "muon-momentum", "muon-nesterov", "muon-ns-steps", "muon-weight-decay"}) {
      flags.refuse(muon_flag, "without --optimizer muon");
    }
  }
  if (o.optimizer == OptimizerKind::muon && o.zero != 0) {
    throw std::invalid_argument(
        "--zero 1 does not combine with --optimizer muon yet (Muon already shares its "
        "matrices out across ranks): give --zero 0");
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
  if (o.warmup_steps > o.steps) {
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
  o.precision = precision_for_device(o.precision, device);
  if (o.precision != Precision::fp16) {
    const std::string why = std::string("with ") + precision_description(o.precision) + " (loss scaling is fp16's)";
    flags.refuse("loss-scale-init", why);
    flags.refuse("loss-scale-growth-interval", why);
  }
  return o;
}

}  // namespace mygpt
