#pragma once
// Everything that shapes a training run, as set by the CLI (launcher/) and read by the trainer.
#include <cstdint>
#include <string>

namespace mygpt {

struct TrainOptions {
  int64_t steps = 5000;           // optimizer steps
  int64_t batch_size = 16;        // micro-batch rows per rank
  int64_t seq_len = 256;          // tokens per row
  int64_t grad_accum = 1;         // micro-batches per optimizer step and rank
  double lr = 1e-3;               // peak learning rate
  double min_lr = 1e-4;           // floor of the cosine decay
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double grad_clip = 1.0;         // 0 disables clipping (the norm is still reported)
  int64_t eval_every = 250;       // 0 disables periodic validation
  int64_t eval_steps = 20;        // validation batches per evaluation (all ranks together)
  int64_t log_every = 10;
  int64_t checkpoint_every = 0;   // 0: only at the end
  uint64_t seed = 1337;
  double bucket_mb = 25;          // DDP gradient bucket size
  bool ddp_overlap = true;        // start bucket all-reduces during backward
  std::string out_dir = "out";
  int64_t keep_checkpoints = 0;   // 0 keeps all
  bool bf16 = false;              // autocast matmuls/attention to bf16 (fp32 master weights)
  int64_t hellaswag_every = 0;    // 0 disables
  int64_t hellaswag_limit = 0;    // examples per evaluation; 0 means all
  int64_t sample_every = 0;       // print a sample every N steps; 0 disables
  double peak_tflops = 0;         // the device's peak for MFU; 0 means unknown
  std::string data_order = "sequential";

  // One "key=value" per line in a fixed order: stored in checkpoints, hashed to compare ranks.
  std::string to_text() const;
};

}  // namespace mygpt
