#include "trainer/checkpoint_entries.h"

#include "trainer/sharded_gather.h"

namespace mygpt {

std::vector<CheckpointEntry> part_checkpoint_entries(const std::string& prefix, const StatefulPart& part,
                                                     Communicator& comm, const torch::Device& device) {
  std::vector<CheckpointEntry> entries;
  const bool per_rank = part.per_rank();
  for (const auto& [key, tensor] : part.state_dict()) {
    CheckpointEntry entry{prefix + "." + key, tensor.scalar_type(), tensor.sizes().vec(), {}};
    if (per_rank) {
      // Rank r's tensor, flattened, is row r; every rank's has the same size (the same part on each).
      entry.shape = {comm.world_size(), tensor.numel()};
      entry.whole_on_writer = [&comm, tensor, device, shape = entry.shape] {
        torch::Tensor rows = comm.gather_to_root(tensor.to(device), kCheckpointWriter);
        return rows.defined() ? rows.view(shape) : rows;
      };
    } else {
      entry.whole_on_writer = [tensor] { return tensor; };
    }
    entries.push_back(std::move(entry));
  }
  for (const ShardedTensor& sharded : part.sharded_state()) {
    entries.push_back({prefix + "." + sharded.name, sharded.dtype, sharded.shape,
                       [&comm, sharded] { return gather_sharded_tensor(comm, sharded, kCheckpointWriter); }});
  }
  return entries;
}

}  // namespace mygpt
