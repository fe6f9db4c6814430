// How many batches one validation pass scores, shared by train's evaluations and `eval --val`.
//
// --eval-steps counts batches of B x T tokens over all ranks together: rank r of W scores batches
// r, r + W, ... below the count and the losses are summed over ranks, so the validation loss is the same
// on any number of ranks (N ranks x A == 1 rank x N*A holds for it as for training). A pass scores each
// batch once: a request beyond the batches the data holds is capped there (with a note), where the loader
// would otherwise wrap around and score the same tokens again.
#pragma once

#include <cstdint>
#include <string>

#include "dataloader/batch_loader.h"

namespace mygpt {

struct ValidationBatches {
  int64_t count = 0;
  std::string note;  // empty unless the request was capped
};

ValidationBatches validation_batches(int64_t requested, const ShardedBatchLoader& loader);

}  // namespace mygpt
