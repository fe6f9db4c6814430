#pragma once
// What a checkpoint keeps of a run. Every stateful part (model, optimizer, data loader, random
// generators) saves and restores itself as named tensors through this one interface, and says how its
// state is shared among ranks and whether it carries over to a different number of ranks.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace mygpt {

using StateDict = std::map<std::string, torch::Tensor>;

// A tensor of a part's state that the ranks hold in pieces (ZeRO's shards): its whole shape and type, and
// this rank's piece of its elements in row-major order, `piece` (1-D, on the part's device, possibly empty)
// from element `offset` on. A checkpoint gathers it whole on the writing rank, one tensor at a time, and
// stores it as if one rank held it all, so it loads on any number of ranks and at any ZeRO stage.
struct ShardedTensor {
  std::string name;
  std::vector<int64_t> shape;
  torch::ScalarType dtype;
  int64_t offset = 0;
  torch::Tensor piece;
};

// What becomes of a part's saved state when a run resumes on a different number of ranks.
enum class OnOtherWorldSize {
  load,    // the state means the same whatever the number of ranks (weights, a global data position)
  reseed,  // a per-rank random stream, restarted from (seed, step, rank): the run goes on, not bit-identically
  refuse,  // the run cannot continue on another number of ranks
};

class StatefulPart {
 public:
  virtual ~StatefulPart() = default;
  // What this rank holds of the state whole (per_rank: its own; else what every rank holds alike).
  virtual StateDict state_dict() const = 0;
  // The state the ranks hold in pieces, beside state_dict()'s (names distinct from its).
  virtual std::vector<ShardedTensor> sharded_state() const { return {}; }
  // The whole state, state_dict()'s and sharded_state()'s entries alike, each whole (read-only: a
  // checkpoint's tensors may be its mapped file); a sharded part keeps its own pieces of them.
  // Throws std::invalid_argument when the state does not fit this part (names, shapes, types).
  virtual void load_state_dict(const StateDict& state) = 0;
  // True when each rank holds its own state (a checkpoint keeps every rank's, each tensor 1-D); false
  // when all ranks hold the same (a checkpoint keeps rank 0's).
  virtual bool per_rank() const = 0;
  virtual OnOtherWorldSize on_other_world_size() const = 0;
  // For OnOtherWorldSize::reseed: starts the part's random stream afresh from seed.
  virtual void reseed(uint64_t seed) { (void)seed; }
};

}  // namespace mygpt
