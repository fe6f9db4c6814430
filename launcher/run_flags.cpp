// The Run group of train's options: where and how the run goes (device, output, checkpoints,
// evaluations, logging, the ranks' communication).
#include "launcher/train_flag_groups.h"

#include <unistd.h>

#include <filesystem>
#include <stdexcept>

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

}  // namespace

void add_run_flags(OptionTable<TrainFlags>& t) {
  using F = TrainFlags;
  using T = TrainOptions;
  using R = RuntimeOptions;
  const auto with_hellaswag = [](const Parsed<TrainFlags>& run) { return run.config.data.hellaswag.has_value(); };
  const auto with_core = [](const Parsed<TrainFlags>& run) { return run.config.data.core.has_value(); };
  const auto no_samples = [](const Parsed<TrainFlags>& run) { return run.config.train.sample_every == 0; };
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
      .check(positive)
      .refused_with({"eval-every"}, [](const Parsed<TrainFlags>& run) { return run.config.train.eval_every == 0; }, "with --eval-every 0");
  t.add("hellaswag-every", &F::train, &T::hellaswag_every, "HellaSwag every N steps when --hellaswag is given")
      .init(250)
      .check(non_negative)
      .only_with("hellaswag", with_hellaswag, "without --hellaswag");
  t.add("hellaswag-examples", &F::train, &T::hellaswag_examples, "examples per HellaSwag evaluation; 0 means all")
      .init(0)
      .check(non_negative)
      .only_with("hellaswag", with_hellaswag, "without --hellaswag");
  t.add("core-every", &F::train, &T::core_every, "CORE every N steps when --core is given")
      .init(2000)
      .check(non_negative)
      .only_with("core", with_core, "without --core");
  t.add("core-max-per-task", &F::train, &T::core_max_per_task,
        "CORE items per task per evaluation (nanochat's training uses 500); 0 means all")
      .init(500)
      .check(non_negative)
      .only_with("core", with_core, "without --core");
  t.add("sample-every", &F::train, &T::sample_every, "rank 0 prints a sample every N steps; 0 disables")
      .init(0)
      .check(non_negative);
  t.add("sample-prompt", &F::train, &T::sample_prompt, "prompt of those samples (the default is one newline, as nanoGPT's samples start)")
      .init("\n")
      .check(not_empty)
      .check(utf8_text)
      .refused_with({"sample-every"}, no_samples, "with --sample-every 0");
  t.add("sample-tokens", &F::train, &T::sample_tokens, "tokens per sample").init(64).check(positive)
      .refused_with({"sample-every"}, no_samples, "with --sample-every 0");
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
        "parameters all-gathered; checkpoints stay whole); 0: every rank holds all of it; 2 (gradients sharded "
        "too) and 3 (parameters too) are estimated by plan")
      .init(0)
      .check([](const std::string& flag, const int64_t& v) {
        if (v < 0 || v > 3) throw std::invalid_argument("--" + flag + " must be 0, 1, 2 or 3, got " + std::to_string(v));
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
}

}  // namespace mygpt
