// How many checkpoint files a run adds to --out at once (issue 40: the space is checked before the first
// step), from --checkpoint-every, --keep-checkpoints, the final checkpoint and those already there.
#include <gtest/gtest.h>

#include "model/gpt_config.h"
#include "trainer/checkpoint_space.h"

namespace mygpt::checkpoint_space_test {
namespace {

TrainOptions saving(int64_t steps, int64_t every, int64_t keep, bool final_checkpoint = true) {
  TrainOptions o;
  o.steps = steps;
  o.checkpoint_every = every;
  o.keep_checkpoints = keep;
  o.final_checkpoint = final_checkpoint;
  return o;
}

TEST(CheckpointSpace, KeptCheckpointsPlusTheOneBeingWritten) {
  GptConfig config;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 64;
  config.block_size = 32;
  config.vocab_size = 65;
  // 10 saves, 2 kept: while the third is written the two before it are still there.
  EXPECT_EQ(checkpoint_space(config, saving(10, 1, 2), 0, 0).files, 3);
  // Two already there (a resumed run): each save prunes one, so one file more at most.
  EXPECT_EQ(checkpoint_space(config, saving(10, 1, 2), 5, 2).files, 1);
  // More already there than kept: the first save prunes them down, still one more at once.
  EXPECT_EQ(checkpoint_space(config, saving(10, 1, 2), 5, 6).files, 1);
  // One save only, none there: one file.
  EXPECT_EQ(checkpoint_space(config, saving(10, 0, 2), 0, 0).files, 1);
  // --keep-checkpoints 0 keeps all: every save of the remaining steps; the final one when not on a multiple.
  EXPECT_EQ(checkpoint_space(config, saving(10, 3, 0), 0, 0).files, 4);  // 3, 6, 9 and the final 10
  EXPECT_EQ(checkpoint_space(config, saving(9, 3, 0), 3, 0).files, 2);   // 6, 9 (the final one is 9)
  EXPECT_EQ(checkpoint_space(config, saving(10, 0, 0, /*final=*/false), 0, 0).files, 0);
  EXPECT_EQ(checkpoint_space(config, saving(10, 5, 2), 10, 2).files, 0) << "nothing left to train";
  // Each: the fp32 weights and AdamW's two moments, 12 bytes a parameter, plus headers.
  const double parameters = static_cast<double>(count_parameters(config).total());
  const auto space = checkpoint_space(config, saving(10, 1, 2), 0, 0);
  EXPECT_GE(space.bytes_each, 12.0 * parameters);
  EXPECT_LE(space.bytes_each, 12.0 * parameters + 1024.0 * 1024.0);
  EXPECT_DOUBLE_EQ(space.needed(), 3 * space.bytes_each);
}

}  // namespace
}  // namespace mygpt::checkpoint_space_test
