#pragma once
// What a checkpoint keeps of a run. Every stateful part (model, optimizer, data loader, random
// generators) saves and restores itself as named tensors through this one interface, and says how its
// state is shared among ranks and whether it carries over to a different number of ranks.
#include <torch/torch.h>

#include <map>
#include <string>

namespace mygpt {

using StateDict = std::map<std::string, torch::Tensor>;

// What becomes of a part's saved state when a run resumes on a different number of ranks.
enum class OnOtherWorldSize {
  load,    // the state means the same whatever the number of ranks (weights, a global data position)
  reseed,  // a per-rank random stream, restarted from (seed, step, rank): the run goes on, not bit-identically
  refuse,  // the run cannot continue on another number of ranks
};

class StatefulPart {
 public:
  virtual ~StatefulPart() = default;
  virtual StateDict state_dict() const = 0;
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
