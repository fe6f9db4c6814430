#pragma once
// What one rank of a training run holds at its peak, estimated from the configuration alone (`plan`):
// the runtime, the data, weights, gradients, AdamW's state, the activations one micro-batch keeps for
// backward, and the working set of the loss and of the embedding's backward.
//
// The per-element costs of the activations were measured on CPU (fp32, glibc malloc, peak RSS of real
// runs: tests/plan_accuracy_test.sh and docs/benchmarks-log.md); the bf16/fp16 (CUDA) ones follow from which
// tensors autocast keeps in 16 bits and have not been checked on a GPU yet.
#include <cstdint>
#include <string>
#include <vector>

#include "model/activation_recompute.h"
#include "model/gpt_config.h"
#include "trainer/train_options.h"

namespace mygpt {

struct MemoryPlanInput {
  GptConfig model;
  int64_t parameters = 0;  // the model's parameter count (tied head counted once)
  int64_t batch_size = 0;  // micro-batch rows
  int64_t seq_len = 0;
  bool fused_loss = true;
  bool half_activations = false;  // bf16 or fp16 autocast: 16-bit activations and weight copies
  bool gpu = false;             // device memory: no runtime baseline or data (they live on the host)
  int64_t baseline_bytes = 0;   // the process before any run state (measured by the caller, CPU)
  int64_t data_bytes = 0;       // resident training data (CPU)
  int64_t zero_shards = 1;      // ranks sharing the sharded state (--zero 1, 2, 3: the world size)
  int64_t zero_stage = 0;       // --zero: 1 shards AdamW's state, 2 also the gradients, 3 also the parameters
  // --zero 3: parameters of the largest unit gathered whole (a transformer block, the embeddings or the head;
  // largest_sharding_unit), in fp32, twice: the unit computing and the next one prefetched.
  int64_t largest_unit_parameters = 0;
  int64_t ranks = 1;            // ranks of the job (communication buffers on CPU when more than one)
  double bucket_bytes = 25.0 * (1 << 20);  // --bucket-mb
  Recompute recompute = Recompute::none;
  int64_t loss_chunk_rows = 0;  // --loss-chunk-rows; 0: sized by device
  bool kept_heap = false;       // CPU: malloc keeps freed memory (--keep-freed-memory, launcher/memory_reuse.h)
  int64_t threads = 1;          // CPU: intra-op threads of the rank (--threads)
};

struct MemoryPart {
  std::string name;
  double bytes = 0;
  std::string note;
};

struct MemoryPlan {
  std::vector<MemoryPart> parts;
  double total_bytes = 0;
};

MemoryPlan estimate_memory(const MemoryPlanInput& in);

// --zero 3 shards the model in units gathered whole one at a time: each transformer block, the
// embeddings (with a tied head, which uses the same matrix), the final norm, and an untied head.
// The parameter count of the largest of them.
int64_t largest_sharding_unit(const GptConfig& model);

// The plan's input for a run of `options` on `ranks` ranks (`plan` and train's check before it builds
// the model); the runtime baseline and the data are left at 0 for the caller.
MemoryPlanInput memory_plan_input(const GptConfig& model, const TrainOptions& options, int64_t ranks, bool gpu);

// Memory the host can still give this process: common/host_memory's figure (Linux's MemAvailable,
// macOS's reclaimable pages), lowered to what a cgroup
// memory limit leaves (v2 memory.max - memory.current, or v1's limit - usage). `source` says which bound
// it is; bytes < 0 where neither can be read.
struct AvailableMemory {
  double bytes = -1;
  std::string source;
};
AvailableMemory available_host_memory();

// The largest micro-batch (rows) whose estimate fits in memory_bytes; 0 when not even one row does.
int64_t largest_micro_batch(MemoryPlanInput in, double memory_bytes);

// The resident set of this process now (Linux's VmRSS, macOS's task_info), 0 where the system does not say.
int64_t current_rss_bytes();

// The runtime's share of a training process's resident set, measured: runs one training step of a
// tiny model of this config's kind (same loss, dropout) on the CPU, so that the code and buffers a
// run pages in are resident, and returns VmRSS. Most of it is LibTorch's code, loaded as it is used.
int64_t measure_training_runtime_bytes(const GptConfig& like, bool fused_loss);

}  // namespace mygpt
