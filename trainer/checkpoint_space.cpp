#include "trainer/checkpoint_space.h"

#include <algorithm>

#include "common/strprintf.h"

namespace mygpt {

double checkpoint_bytes(const GptConfig& config) {
  const double parameters = static_cast<double>(count_parameters(config).total());
  // Per parameter tensor: four header entries (weights, AdamW's two moments, their step; ~150 bytes each)
  // and the metadata's checksums; the rest (the run's options, the CPU generator's 5 KB state, the data
  // position) fits in 32 KiB. Measured: the tiny preset's checkpoint is 344,872 bytes, 22,312 above its
  // 12 x 26,880; this gives 384,000 (28 tensors).
  const double tensors = static_cast<double>(parameter_shapes(config).size());
  return 12.0 * parameters + 1024.0 * tensors + 32.0 * 1024.0;
}

CheckpointSpace checkpoint_space(const GptConfig& config, const TrainOptions& options, int64_t start_step,
                                 int64_t existing) {
  const int64_t every = options.checkpoint_every.value_or(0);
  const int64_t keep = options.keep_checkpoints.value_or(0);
  const int64_t steps = options.steps;
  int64_t saves = every > 0 ? steps / every - start_step / every : 0;
  if (options.final_checkpoint && (every <= 0 || steps % every != 0) && steps > start_step) ++saves;
  CheckpointSpace space;
  space.bytes_each = checkpoint_bytes(config);
  if (saves <= 0) {
    space.how = "no checkpoint";
    return space;
  }
  if (keep <= 0 && steps == kUnboundedSteps) {  // --time-budget alone ends the run: how many is not known
    space.files = 1;
    space.how = "every checkpoint kept (--keep-checkpoints 0) of a run that ends with its --time-budget: as many as "
                "it has time for, one counted here";
    return space;
  }
  if (keep <= 0) {
    space.files = saves;
    space.how = strprintf("%lld checkpoint(s) of %lld steps kept (--keep-checkpoints 0 keeps all)",
                          static_cast<long long>(saves), static_cast<long long>(steps - start_step));
    return space;
  }
  // Pruning follows each save: while one is written, the newest `keep` of the earlier ones are there.
  // (saves capped first: a run of --time-budget alone counts nearly 2^63 of them)
  space.files = std::max<int64_t>(0, std::min(existing + std::min(saves, keep + 1) - 1, keep) - existing) + 1;
  space.how = strprintf("%lld more checkpoint(s): --keep-checkpoints %lld and the one being written, %lld already in "
                        "--out",
                        static_cast<long long>(space.files), static_cast<long long>(keep),
                        static_cast<long long>(existing));
  return space;
}

}  // namespace mygpt
