#pragma once
// A run's checkpoint as entries to stream (trainer/checkpoint.h's save_checkpoint_streamed): each tensor of
// each stateful part with its whole shape and type, and how rank 0, the writer, gets it whole, one at a
// time. What every rank holds alike is rank 0's own; a per-rank state (random generators) is a
// [world size, n] table whose rows the ranks send to rank 0; a sharded tensor (ZeRO's shards,
// StatefulPart::sharded_state) is gathered from the ranks' pieces. Rank 0 thus never holds more than one
// of the model's tensors beyond its own state, and no other rank more than its own state and one piece.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "trainer/checkpoint.h"
#include "trainer/stateful.h"

namespace mygpt {

// The rank that writes checkpoints (RunOutput::writes() is true there alone).
inline constexpr int kCheckpointWriter = 0;

// The entries of one part, named "<prefix>.<key>". Every rank calls it at the same point (ShardedAdamW's
// state_dict() is a collective); device: where the part's per-rank tensors travel (NCCL: the GPU).
std::vector<CheckpointEntry> part_checkpoint_entries(const std::string& prefix, const StatefulPart& part,
                                                     Communicator& comm, const torch::Device& device);

}  // namespace mygpt
