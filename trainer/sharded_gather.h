#pragma once
// A tensor the ranks hold in pieces (ShardedTensor, trainer/stateful.h) made whole on one rank: what a
// checkpoint's writer gets of ZeRO's sharded state, and what Muon's owner of a matrix gets of its
// gradient under --zero 1. Only that rank ever holds the whole tensor.
#include <torch/torch.h>

#include "distributed/communicator.h"
#include "trainer/stateful.h"

namespace mygpt {

// A collective: `sharded`, whole, on `root` (its shape and type); undefined elsewhere. Throws
// std::logic_error there when the ranks' pieces do not cover the tensor exactly once.
torch::Tensor gather_sharded_tensor(Communicator& comm, const ShardedTensor& sharded, int root);

}  // namespace mygpt
