#pragma once
// The disk a run's checkpoints take, checked before its first step like memory is: a save that fails for
// want of space comes after all the steps before it (issue 40: 30 steps, then "No space left on device").
// `plan` prints the same figures.
#include <cstdint>
#include <string>

#include "model/gpt_config.h"
#include "trainer/train_options.h"

namespace mygpt {

struct CheckpointSpace {
  double bytes_each = 0;  // one checkpoint file
  int64_t files = 0;      // the most this run adds to --out at once (the newest kept + the one being written)
  double needed() const { return bytes_each * static_cast<double>(files); }
  std::string how;        // "3 = --keep-checkpoints 2 + the one being written", for messages
};

// One checkpoint's size: the fp32 weights and AdamW's two fp32 moments (12 bytes a parameter; with Muon
// its matrices keep one moment instead of two, so this bounds it from above), the safetensors header and
// the run's metadata (a few KiB a tensor at most), the data position and the random generators.
double checkpoint_bytes(const GptConfig& config);

// What the steps after `start_step` write: a checkpoint every --checkpoint-every steps and the final one,
// the oldest beyond --keep-checkpoints pruned after each save. `existing`: checkpoints already in --out
// (those pruned as the run saves make room; with --keep-checkpoints 0 none are).
CheckpointSpace checkpoint_space(const GptConfig& config, const TrainOptions& options, int64_t start_step,
                                 int64_t existing);

}  // namespace mygpt
