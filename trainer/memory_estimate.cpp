#include "trainer/memory_estimate.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "common/host_memory.h"
#include "model/chunked_lm_loss.h"
#include "model/gpt.h"
#include "trainer/adamw.h"

namespace mygpt {
namespace {

// Bytes one micro-batch keeps for backward per element of (rows x tokens x width) and layer. fp32 on
// CPU: measured, from the growth of peak RSS with the batch (GPT-2 124M at sequence 64 and
// shakespeare-char: 70-78 bytes; the tensors themselves account for ~68: the block's input, both
// layer norms' outputs, q/k/v, the attention output and its contiguous copy, the MLP's 4x-wide input
// and GELU output). bf16 autocast keeps the 16-bit copies that the matmuls read and the fp32
// residual stream: ~38 bytes by the same count, not yet measured on a GPU.
constexpr double kActivationBytesFp32 = 70.0;
constexpr double kActivationBytesBf16 = 38.0;
// With dropout, LibTorch's CPU attention takes the math path, which keeps the (heads x T x T) scores,
// their softmax and the dropout mask: measured ~31 bytes per score element (shakespeare-char).
constexpr double kMathAttentionBytes = 31.0;
// The unfused loss holds whole (rows x tokens x vocab) fp32 logits: the logits, their log-softmax, its
// gradient and transients, ~5 copies at the peak (measured, GPT-2 124M).
constexpr double kUnfusedLogitCopies = 5.0;
// Of those bytes per element, what --recompute mlp saves: measured on CPU (shakespeare-char, batch 32 x
// 128: 130 MiB less peak RSS than none), ~14 bytes, well below the 36 of the MLP's tensors (the
// allocator reuses their memory in the plain path too). bf16 scaled alike, not measured.
constexpr double kMlpBytesFp32 = 14.0;
constexpr double kMlpBytesBf16 = 7.0;
// Rotary positions (model/gpt.cpp's rotate() on the queries and on the keys: a negated half, their
// concatenation, two products and a sum, each a new tensor): per token, layer and rotated element (the
// queries' width plus the keys'), measured on CPU: nanochat-d4 (2 heads of 128, as many kv-heads) at
// batch 4 and 16 x 128, rotary against --positions learned, grew 134 MiB more over those 12 rows, i.e. 89
// bytes per (token x width) element and layer, 44.5 per rotated element. bf16 halved by the same count.
constexpr double kRotaryBytesFp32 = 44.5;
constexpr double kRotaryBytesBf16 = 22.0;
// Several ranks on CPUs: the MPI backend's temporaries while a gradient bucket is reduced (the parts it
// receives and the sums it sends on), measured as peak RSS against bucket size on 2 ranks (8 x 512
// model, --bucket-mb 1 and 25): ~3 buckets' bytes, plus ~22 MiB of Open MPI's own per-rank memory. With
// --zero 1 the all-gather of the updated shards adds its receive buffer and MPI's copy of it: ~4.5
// buckets (tests/plan_accuracy_test.py: --zero 1 saves ~60 MiB of that model's 96 MiB of half AdamW state).
constexpr double kMpiBucketCopies = 3.0;
constexpr double kMpiBucketCopiesZero = 4.5;
constexpr double kMpiRankBytes = 22.0 * (1 << 20);
// A heap that malloc never trims and never bypasses with mmap (--keep-freed-memory, the default on CPUs)
// ends above the peak that glibc's defaults reach by about one of the largest blocks a step frees and
// allocates again; presumably a hole that size is taken by smaller blocks before the next one comes.
// Measured, peak RSS of 3 steps against glibc's defaults (AMD EPYC, glibc 2.36): the small preset with
// GPT-2's vocabulary, batch 4 x 128, whose largest block is the fused loss's chunk of logits, by
// --loss-chunk-rows: 512 rows (98 MiB) +96 MiB, 333 (64 MiB, the default) +63, 256 (49 MiB) +47.
// GPT-2 124M at batch 4 x 64, whose largest are the (vocab x width) gradients of the head and of the
// embedding (147 MiB; its chunk is 49 MiB): +177, though +30 with the same policy set from the
// environment at start-up, which lays the heap out otherwise. Where no vocabulary is large, the MLP's
// 4x-wide hidden tensor is the largest: shakespeare-char at batch 32 x 128 (24 MiB) +18, nanoGPT's CPU
// model at batch 32 x 256 (16 MiB) +20 to +34, +-15 MiB from run to run. The unfused loss's whole logits
// come back each step in blocks of one size and added nothing (98 MiB of them: -2 MiB).
constexpr double kKeptHeapBlocks = 1.0;
// With more than one intra-op thread the kept heap holds about one such block more: the threads that
// allocate inside parallel regions get malloc arenas of their own, and each keeps its own hole. Peak RSS
// of 3 steps against 1 thread (Intel Xeon, 2 cores, glibc 2.36, process exit not counted; launcher/main.cpp):
// a 4 x 256 model with GPT-2's vocabulary at batch 8 x 128 (largest block 49 MiB) +70 MiB at 2 threads and
// +38 at 4, shakespeare-char at batch 32 x 128 (24 MiB) +40 and +37, the small preset on char text at
// batch 8 (2 MiB) +1 and +5: one block more, not one per thread.
constexpr double kKeptHeapBlocksThreaded = 2.0;

}  // namespace

MemoryPlan estimate_memory(const MemoryPlanInput& in) {
  const GptConfig& m = in.model;
  const double P = static_cast<double>(in.parameters);
  const double rows = static_cast<double>(in.batch_size);
  const double T = static_cast<double>(in.seq_len), C = static_cast<double>(m.n_embd);
  const double L = static_cast<double>(m.n_layer), V = static_cast<double>(m.vocab_size);
  const double H = static_cast<double>(m.n_head);
  const double head_bytes = V * C * 4;  // one fp32 (vocab x width) matrix

  // Per micro-batch row: the activations, the math attention's scores, the loss's logits. Recomputed
  // parts are not kept, except for the one block (or MLP) being recomputed in backward.
  // The constants were measured on GPT-2's block (an MLP 4x wide); another member's MLP scales its part
  // by its width (SwiGLU's input projection is twice as wide); rotary positions add kRotaryBytes. RMSNorm
  // and QK-norm are left out: against LayerNorm and no QK-norm they added 32 and 23 MiB to nanochat-d4's
  // growth over 12 rows of 128 tokens (~20 and ~15 bytes per element and layer; the spread between runs
  // is +-15 MiB), small beside the rest.
  const double mlp_scale = static_cast<double>(m.mlp_in_rows() + m.mlp_width()) / (8.0 * C);
  const double mlp_bytes = T * C * (in.half_activations ? kMlpBytesBf16 : kMlpBytesFp32) * mlp_scale;
  // Rotary positions turn the queries (n_head heads) and keys (kv-heads) with temporaries of their width.
  const double rotated_width = static_cast<double>((m.n_head + m.kv_heads()) * m.head_size());
  const double rotary_bytes = m.positions == Positions::rotary
                                  ? T * rotated_width * (in.half_activations ? kRotaryBytesBf16 : kRotaryBytesFp32)
                                  : 0.0;
  const double block_bytes = T * C * (in.half_activations ? kActivationBytesBf16 : kActivationBytesFp32) +
                             (mlp_scale == 1.0 ? 0.0 : mlp_bytes - mlp_bytes / mlp_scale) + rotary_bytes;
  const bool math_attention = !in.gpu && m.dropout > 0;
  const double scores_bytes = math_attention ? H * T * T * kMathAttentionBytes : 0.0;
  double per_row = L * (block_bytes + scores_bytes);
  if (in.recompute == Recompute::mlp) per_row = L * (block_bytes - mlp_bytes + scores_bytes) + mlp_bytes;
  // --recompute block: each block's fp32 input, plus one block recomputed and its activation gradients
  // during backward (measured within 5% on CPU, shakespeare-char with dropout).
  if (in.recompute == Recompute::block) per_row = L * T * C * 4 + 2 * (block_bytes + scores_bytes);
  double loss_fixed = head_bytes;  // the head's weight gradient (computed in forward when fused)
  double loss_per_row = 0;
  std::string loss_note;
  // The largest block a step frees and allocates again: one MLP's hidden tensor, a (vocab x width)
  // gradient (the embedding's dense one, the head's computed in the loss), or a chunk of logits.
  double largest_block =
      std::max(rows * T * static_cast<double>(m.mlp_in_rows()) * (in.half_activations ? 2.0 : 4.0), head_bytes);
  if (in.fused_loss) {
    // One chunk of fp32 logits at a time (and its 16-bit copy under autocast).
    const double chunk = static_cast<double>(
        in.loss_chunk_rows > 0
            ? in.loss_chunk_rows
            : lm_loss_chunk_rows(m.vocab_size, m.n_embd, in.gpu ? c10::DeviceType::CUDA : c10::DeviceType::CPU));
    const double chunk_logits = std::min(rows * T, chunk) * V;
    // A soft-cap on a GPU (the ATen ops of model/chunked_lm_loss.cpp) holds three more fp32 chunks beside
    // the head's product: tanh(z / cap), kept for the gradient's 1 - tanh^2, the capped logits, and that
    // 1 - tanh^2 (measured on a CPU when it ran them: nanochat-d4's peak RSS rose by 255 MiB with the cap
    // at batch 4 x 128, 64 MiB chunks). A CPU's loss loops (model/lm_loss_cpu) cap each row in place.
    const double cap_bytes = m.logit_softcap && in.gpu ? 3 * chunk_logits * 4 : 0.0;
    const double chunk_bytes = chunk_logits * (in.half_activations ? 6.0 : 4.0) + cap_bytes;
    largest_block = std::max(largest_block, chunk_logits * 4);
    loss_fixed += chunk_bytes;
    loss_note = "fused: the head's weight gradient and one chunk of logits";
  } else {
    // A soft-cap's tanh and capped logits replace the plain logits there: one whole copy more by count
    // (not measured).
    loss_per_row = T * V * 4 * (kUnfusedLogitCopies + (m.logit_softcap ? 1.0 : 0.0));
    loss_note = "unfused: whole logits, their log-softmax and gradient";
  }

  MemoryPlan plan;
  auto add = [&](std::string name, double bytes, std::string note = "") {
    plan.parts.push_back({std::move(name), bytes, std::move(note)});
    plan.total_bytes += bytes;
  };
  if (!in.gpu) {
    add("runtime", static_cast<double>(in.baseline_bytes),
        "LibTorch and MPI as a training step pages them in (measured: one step of a tiny model)");
    add("data", static_cast<double>(in.data_bytes), "token ids in memory, or the mapped token files");
  }
  // ZeRO: stage 1 shards AdamW's moments over N ranks, 2 the gradients as well, 3 the fp32 parameters too
  // (DeepSpeed's stages; FSDP's SHARD_GRAD_OP is 2, FULL_SHARD 3). A caller that names only the shards is
  // stage 1, as before there were more.
  const int64_t stage = in.zero_stage > 0 ? in.zero_stage : (in.zero_shards > 1 ? 1 : 0);
  const double N = static_cast<double>(std::max<int64_t>(1, in.zero_shards));
  const std::string shard_note = "this rank's 1/" + std::to_string(std::max<int64_t>(1, in.zero_shards)) +
                                 " (--zero " + std::to_string(stage) + ")";
  const double bucket = std::min(in.bucket_bytes, 4 * P);
  const double unit = static_cast<double>(in.largest_unit_parameters);
  // A unit is gathered in its parameters' type, fp32 (trainer/fully_sharded_model.h); autocast's 16-bit
  // copies of its weights are made from it and kept for backward, as at the other stages.
  const double compute_bytes = 4.0;  // per element of a gathered unit
  if (stage >= 3) {
    add("weights", 4 * P / N, "fp32, " + shard_note);
    add("gathered units", 2 * unit * compute_bytes,
        "two of the largest unit's whole parameters in fp32: the one computing and the next one prefetched");
  } else {
    add("weights", 4 * P, "fp32");
  }
  if (stage >= 3) {
    add("gradients", 4 * P / N + 4 * unit,
        "fp32, " + shard_note + ", and one unit's whole gradients until they are reduce-scattered");
  } else if (stage == 2) {
    add("gradients", 4 * P / N + 2 * bucket,
        "fp32, " + shard_note + ", and two buckets (--bucket-mb): one filling in backward, one reduce-scattered");
  } else {
    add("gradients", 4 * P, "fp32; the DDP buckets are these (gradients are views into them)");
  }
  if (stage >= 1) {
    add("AdamW state", 8 * P / N, "two fp32 moments, " + shard_note);
  } else {
    add("AdamW state", 8 * P, "two fp32 moments");
  }
  if (!in.gpu && in.ranks > 1) {
    // --zero 3 moves units where the other stages move buckets (not yet measured on CPUs).
    const double moved = stage >= 3 ? std::max(bucket, 4 * unit) : bucket;
    add("communication", (stage >= 1 ? kMpiBucketCopiesZero : kMpiBucketCopies) * moved + kMpiRankBytes,
        stage >= 3 ? "MPI's temporaries while a unit is gathered or reduce-scattered (~4.5 units, as --zero 1's "
                     "buckets) and its runtime"
                   : "MPI's temporaries while a gradient bucket is reduced (~3 buckets of --bucket-mb; 4.5 with "
                     "--zero 1) and its runtime");
  } else if (in.gpu && stage >= 3) {
    // NCCL gathers into the unit's whole buffer and reduce-scatters out of its gradient (both counted above);
    // what it reads and writes besides is this rank's shard of each: the 16-bit copy sent, the sum received.
    add("communication", 2 * unit * compute_bytes / N + 4 * unit / N,
        "this rank's shards of the gathered units (sent) and of a unit's reduced gradient (received)");
  }
  if (in.half_activations) {
    add("16-bit weight copies", 2 * P,
        stage >= 3 ? "autocast's copies of every unit's weights, made as it is gathered and kept for backward"
                   : "autocast's cache for the forward pass");
  }
  const char* recompute_note[] = {"", "; each MLP recomputed in backward (--recompute mlp)",
                                  "; each block recomputed in backward, only its input kept (--recompute block)"};
  add("activations", rows * per_row,
      std::string(math_attention ? "kept for backward; dropout puts CPU attention on the math path (T x T scores)"
                                 : "kept for backward") +
          recompute_note[static_cast<int>(in.recompute)]);
  add("loss", loss_fixed + rows * loss_per_row, loss_note);
  add("embedding backward", head_bytes, "the token embedding's dense gradient before it is added");
  if (!in.gpu && in.kept_heap) {
    if (in.threads > 1) {
      add("kept heap", kKeptHeapBlocksThreaded * largest_block,
          "malloc keeps freed memory (--keep-freed-memory): about two of the step's largest blocks more with " +
              std::to_string(in.threads) + " threads (the threads' own malloc arenas keep their own)");
    } else {
      add("kept heap", kKeptHeapBlocks * largest_block,
          "malloc keeps freed memory (--keep-freed-memory): about one of the step's largest blocks more");
    }
  }
  // --zero 3 never builds the model whole: each rank draws or reads one parameter at a time and keeps its
  // shard of it (trainer/fully_sharded_model.h). Start-up holds the shards and one whole parameter, less
  // than a step's shards, optimizer state and gathered units: it is never the peak, and has no line.
  return plan;
}

int64_t largest_sharding_unit(const GptConfig& model) {
  // "h.<i>.": block i; the embeddings (and embedding norm) one unit, the final norm and an untied head one
  // each (trainer/fully_sharded_model.cpp's model units).
  std::map<std::string, int64_t> units;
  for (const auto& [name, shape] : parameter_shapes(model)) {
    int64_t numel = 1;
    for (const int64_t d : shape) numel *= d;
    std::string unit = "embedding";
    if (name.rfind("h.", 0) == 0) {
      unit = name.substr(0, name.find('.', 2));
    } else if (name.rfind("ln_f.", 0) == 0) {
      unit = "final norm";
    } else if (name.rfind("lm_head.", 0) == 0) {
      unit = "head";
    }
    units[unit] += numel;
  }
  int64_t largest = 0;
  for (const auto& [unit, numel] : units) largest = std::max(largest, numel);
  return largest;
}

MemoryPlanInput memory_plan_input(const GptConfig& model, const TrainOptions& o, int64_t ranks, bool gpu) {
  MemoryPlanInput input;
  input.model = model;
  input.parameters = count_parameters(model).total();
  input.batch_size = o.batch_size;
  input.seq_len = o.seq_len;
  input.fused_loss = o.fused_loss;
  input.half_activations = o.precision == Precision::bf16 || o.precision == Precision::fp16;
  input.gpu = gpu;
  input.zero_shards = o.zero > 0 ? ranks : 1;
  input.zero_stage = o.zero;
  input.largest_unit_parameters = largest_sharding_unit(model);
  input.ranks = ranks;
  input.bucket_bytes = o.bucket_mb * (1 << 20);
  input.recompute = o.recompute;
  input.loss_chunk_rows = o.loss_chunk_rows;
  return input;
}

namespace {

// The first number of a file such as memory.max ("max" and unreadable files: none).
std::optional<double> number_in(const char* path) {
  std::ifstream in(path);
  double value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

}  // namespace

AvailableMemory available_host_memory() {
  const HostMemoryFigure host = host_available_memory();
  AvailableMemory available{host.bytes, host.source};
  // (Linux) A container's limit can be far below the machine's free memory; the kernel kills at the limit.
  struct CgroupFiles {
    const char* limit;
    const char* usage;
  };
  for (const auto& files : {CgroupFiles{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
                            CgroupFiles{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                        "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const auto limit = number_in(files.limit), usage = number_in(files.usage);
    if (!limit || !usage) continue;
    const double left = std::max(0.0, *limit - *usage);
    if (available.bytes < 0 || left < available.bytes) {
      available.bytes = left;
      available.source = std::string("the cgroup's memory limit (") + files.limit + " less its usage)";
    }
    break;
  }
  return available;
}

int64_t largest_micro_batch(MemoryPlanInput in, double memory_bytes) {
  auto fits = [&](int64_t rows) {
    in.batch_size = rows;
    return estimate_memory(in).total_bytes <= memory_bytes;
  };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;  // fits(lo); hi is the first size tried that may not
  while (fits(hi) && hi < (int64_t{1} << 40)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

int64_t measure_training_runtime_bytes(const GptConfig& like, bool fused_loss) {
  {
    GptConfig tiny = like;
    tiny.n_layer = 1;
    tiny.n_head = 1;
    tiny.n_kv_head = 0;  // as many as heads
    tiny.n_embd = 8;
    tiny.mlp_hidden = 0;  // 4x
    tiny.block_size = 8;
    tiny.vocab_size = 16;
    Gpt model(tiny, GptRuntime{.fused_loss = fused_loss});
    model->train();
    AdamW optimizer(model->decay_parameters(), model->no_decay_parameters(), AdamWOptions{});
    const auto x = torch::randint(16, {2, 8}, torch::kLong);
    model->loss(x, x).backward();
    optimizer.step();
  }
  return current_rss_bytes();
}

int64_t current_rss_bytes() { return resident_set_bytes(); }

}  // namespace mygpt
