// `mygpt-ddp plan`: a dry run of a training configuration. Sizes the model from its config (nothing
// is allocated, so any size plans instantly), reads the data's vocabulary as `train` would (without
// DATA: GPT-2 token data), derives the
// accumulation for the world it is told (--ranks), and estimates what one rank holds at its peak
// (trainer/memory_estimate.h); against a GPU's memory it says whether that fits and the largest
// micro-batch that would.
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <thread>
#include <vector>

#include "common/strprintf.h"
#include "launcher/commands.h"
#include "launcher/device_probe.h"
#include "launcher/memory_reuse.h"
#include "launcher/run_plan.h"
#include "launcher/train_flags.h"
#include "trainer/checkpoint_space.h"
#include "trainer/memory_estimate.h"

namespace mygpt {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// The device a run would use, without requiring it here: `--device cuda` plans for a GPU on any
// machine; auto means a GPU when one is visible.
// --gpu-memory names a GPU's memory, so with --device auto it plans for CUDA even where none is visible.
bool plans_for_gpu(const std::string& device, double gpu_memory) {
  return device == "cuda" || (device == "auto" && (torch::cuda::is_available() || gpu_memory > 0));
}

// The largest micro-batch of at most `fits` rows that --total-batch-tokens still divides (0: none).
int64_t largest_dividing_micro_batch(int64_t fits, const TrainOptions& o, int64_t ranks) {
  if (o.total_batch_tokens <= 0) return fits;
  for (int64_t rows = fits; rows > 0; --rows) {
    if (o.total_batch_tokens % (rows * o.seq_len * ranks) == 0) return rows;
  }
  return 0;
}

const char* recompute_name(Recompute r) {
  return r == Recompute::none ? "none" : r == Recompute::mlp ? "mlp" : "block";
}

// What --zero, --recompute and --precision would do to the estimate: every combination (the ZeRO stages
// only with several ranks; 16-bit only where the plan is fp32 on a GPU, offered as --precision auto, which
// is bf16 or fp16 by GPU with the same memory), its total at this micro-batch and the largest
// micro-batch that fits, cheapest in compute first.
void print_memory_options(const MemoryPlanInput& current, int64_t ranks, double device_memory) {
  std::cout << strprintf("memory options (per rank, micro-batch %lld; * this configuration):\n",
                         static_cast<long long>(current.batch_size));
  std::vector<bool> sixteen_bit = {current.half_activations};
  if (!current.half_activations && current.gpu) sixteen_bit.push_back(true);
  // The ZeRO stages shard over the ranks: with one rank only stage 0 is offered.
  std::vector<int64_t> stages = {0};
  if (ranks > 1) stages = {0, 1, 2, 3};
  for (const bool half : sixteen_bit) {
    for (const Recompute recompute : {Recompute::none, Recompute::mlp, Recompute::block}) {
      for (const int64_t stage : stages) {
        MemoryPlanInput option = current;
        option.half_activations = half;
        option.recompute = recompute;
        option.zero_stage = stage;
        option.zero_shards = stage > 0 ? ranks : 1;
        const double total = estimate_memory(option).total_bytes;
        const bool is_current = half == current.half_activations && recompute == current.recompute &&
                                stage == current.zero_stage;
        const std::string flags = strprintf("--zero %lld --recompute %-5s%s", static_cast<long long>(stage),
                                            recompute_name(recompute), half != current.half_activations ? " --precision auto" : "");
        std::cout << strprintf("  %c %-43s %8.2f GiB  %-4s largest micro-batch %lld\n", is_current ? '*' : ' ',
                               flags.c_str(), total / kGiB, total <= device_memory ? "fits" : "no",
                               static_cast<long long>(largest_micro_batch(option, device_memory)));
      }
    }
  }
}

int run_plan(const Parsed<TrainFlags>& given_flags, const JobSession& job) {
  const RunStart start = open_run_start(given_flags);  // --init-from / --resume decide the shape, as in train
  // Options of the process (not taken from a resumed checkpoint): the same before and after resolving.
  const TrainFlags& given = given_flags.config;
  const int64_t ranks = given.plan.ranks > 0 ? given.plan.ranks : job.world().world_size;
  const bool gpu = plans_for_gpu(given.runtime.device, given.plan.gpu_memory);
  DataFootprint data;
  DataSource source;
  if (given_flags.gave("data") || start.model) {
    source.read = [&data](const DataOptions& options) {
      data = data_footprint(options);
      return DataFacts{data.vocab_size, nullptr};
    };
  } else {
    // No data named: the size of a model for GPT-2 token data (the gpt2 presets' recipe).
    data.vocab_size = given.data.vocab_size.value_or(padded_vocab_size(50257));
    data.description = "none given: GPT-2 token data (vocab " + std::to_string(data.vocab_size) +
                       ") assumed; name DATA to plan for it";
    source.assumed = DataFacts{data.vocab_size, nullptr};
  }
  const RunPlan run = resolve_run(given_flags, start, source,
                                  RunPlace{gpu ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU),
                                           static_cast<int>(ranks), /*here=*/false, 0, {}});
  const TrainFlags& f = run.flags.config;
  const GptConfig& config = run.model;
  const TrainOptions& o = run.train;
  if (f.plan.gpu_memory > 0 && !gpu) {
    std::cout << "note: --gpu-memory with --device " << f.runtime.device
              << ": the plan is for CPUs, checked against that memory (--device cuda or auto plans for a GPU)\n";
  }

  const ParameterCounts n = count_parameters(config);
  const double flops_per_token = training_flops_per_token(config, o.seq_len);
  const double tokens_per_step = static_cast<double>(o.batch_size * o.seq_len * o.grad_accum);
  std::cout << strprintf("model: %lld layers, %lld heads, %lld wide, block %lld, vocab %lld, %s\n",
                         static_cast<long long>(config.n_layer), static_cast<long long>(config.n_head),
                         static_cast<long long>(config.n_embd), static_cast<long long>(config.block_size),
                         static_cast<long long>(config.vocab_size), config.bias ? "biases" : "no biases");
  if (!config.is_gpt2_architecture()) std::cout << "architecture: " << config.architecture_text() << "\n";
  std::cout
            << strprintf("parameters: %lld (%lld decayed in %lld tensors, %lld not decayed in %lld tensors)\n",
                         static_cast<long long>(n.total()), static_cast<long long>(n.decayed),
                         static_cast<long long>(n.decayed_tensors), static_cast<long long>(n.not_decayed),
                         static_cast<long long>(n.not_decayed_tensors))
            << "data: " << data.description << "\n"
            << strprintf("world: %lld rank(s) on %s | precision %s | --zero %lld | --recompute %s\n",
                         static_cast<long long>(ranks), gpu ? "CUDA GPUs" : "CPUs", precision_description(o.precision),
                         static_cast<long long>(o.zero), recompute_name(o.recompute))
            << strprintf("per step and rank: %lld x %lld tokens x %lld accumulation = %.0f tokens, %.3g FLOPs "
                         "(%.3g per token); %.0f tokens per step over all ranks\n",
                         static_cast<long long>(o.batch_size), static_cast<long long>(o.seq_len),
                         static_cast<long long>(o.grad_accum), tokens_per_step, flops_per_token * tokens_per_step,
                         flops_per_token, tokens_per_step * static_cast<double>(ranks))
            << (o.time_budget
                    ? strprintf("schedule: a time budget of %s%s, lr %.3g -> %.3g by the share of it spent, warmup %g of "
                                "it\n",
                                duration_text(*o.time_budget).c_str(),
                                o.steps == kUnboundedSteps
                                    ? ""
                                    : strprintf(" or %lld steps, whichever comes first", static_cast<long long>(o.steps))
                                          .c_str(),
                                o.lr, o.min_lr.value(), o.warmup_fraction)
                    : strprintf("schedule: %lld steps, lr %.3g -> %.3g, warmup %lld\n", static_cast<long long>(o.steps),
                                o.lr, o.min_lr.value(), static_cast<long long>(o.warmup_steps)));
  // The figure train checks against --out's free space before its first step (a fresh run's).
  const CheckpointSpace disk = checkpoint_space(config, o, /*start_step=*/0, /*existing=*/0);
  std::cout << strprintf("checkpoints: about %.1f MiB each; at most %.1f MiB in --out at once (%s)\n",
                         disk.bytes_each / kMiB, disk.needed() / kMiB, disk.how.c_str());

  MemoryPlanInput input = memory_plan_input(config, o, ranks, gpu);
  input.kept_heap = !gpu && keeps_freed_memory(f.runtime.keep_freed_memory);
  // The threads train would run (launcher/device.cpp's set_cpu_threads: 0 is the cores over the ranks).
  input.threads = f.runtime.threads > 0
                      ? f.runtime.threads
                      : std::max<int64_t>(1, std::thread::hardware_concurrency() / std::max<int64_t>(1, ranks));
  // Measured with text data loaded: its ids are counted apart, as data.
  if (!gpu) {
    input.baseline_bytes =
        measure_training_runtime_bytes(config, o.fused_loss) - (data.loaded ? data.resident_bytes : 0);
  }
  input.data_bytes = data.resident_bytes;
  const MemoryPlan memory = estimate_memory(input);
  std::cout << (gpu ? "GPU memory per rank (estimate of the allocator's peak; the CUDA context comes on top):\n"
                : input.kept_heap
                    ? "memory per rank (estimate of the peak resident set; malloc keeps freed memory, "
                      "--keep-freed-memory):\n"
                    : "memory per rank (estimate of the peak resident set; malloc returns freed memory, as glibc's "
                      "defaults or the environment's MALLOC_* settings have it):\n");
  for (const auto& part : memory.parts) {
    std::cout << strprintf("  %-20s %10.1f MiB  %s\n", part.name.c_str(), part.bytes / kMiB, part.note.c_str());
  }
  std::cout << strprintf("  %-20s %10.1f MiB (%.2f GiB)\n", "total", memory.total_bytes / kMiB,
                         memory.total_bytes / kGiB);

  double device_memory = f.plan.gpu_memory * kGiB;
  if (device_memory == 0 && gpu && torch::cuda::device_count() > 0) device_memory = cuda_total_memory_bytes(0);
  if (device_memory > 0) {
    const int64_t largest = largest_micro_batch(input, device_memory);
    std::cout << strprintf("fits in %.1f GiB: %s; the largest micro-batch that fits: %lld rows",
                           device_memory / kGiB, memory.total_bytes <= device_memory ? "yes" : "NO",
                           static_cast<long long>(largest));
    // The suggestion must be one the run accepts: --total-batch-tokens refuses a micro-batch it cannot divide.
    const int64_t usable = largest_dividing_micro_batch(largest, o, ranks);
    if (usable != largest) {
      std::cout << strprintf(", and of those the largest that --total-batch-tokens %lld divides on %lld rank(s): %lld",
                             static_cast<long long>(o.total_batch_tokens), static_cast<long long>(ranks),
                             static_cast<long long>(usable));
    }
    std::cout << "\n";
    print_memory_options(input, ranks, device_memory);
  } else if (gpu) {
    std::cout << "fits: give --gpu-memory GiB to check (no GPU visible here)\n";
  }
  return 0;
}

}  // namespace

Command plan_command() {
  // "[train options]": it takes train's whole command line; its --help lists those that change the plan.
  return make_command<TrainFlags>(kPlanCommand, "plan [DATA] [train options] [--ranks N] [--gpu-memory GiB]",
                                  "dry run: parameters, FLOPs and per-rank memory of a configuration",
                                  /*multi_rank=*/false, &train_flag_table, &run_plan, &shown_in_plan_help);
}

}  // namespace mygpt
