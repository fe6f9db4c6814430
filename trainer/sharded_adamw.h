#pragma once
// ZeRO stages 1 and 2 (--zero 1, --zero 2): AdamW whose moments exist only for this rank's shard of the
// parameters. Stage 2 differs only in the gradients it is given: the synchronizer keeps just this rank's
// shard of them (GradientSharding::shard_only) instead of whole buckets of which one chunk is averaged.
//
// The parameters move into flat buffers laid out exactly like the gradient buckets
// (GradientSynchronizer::layout(), sharded): this rank's chunk of a parameter bucket holds the same
// elements as its chunk of the gradient bucket, which the reduce-scatter leaves averaged. Each rank runs
// the fused AdamW kernel on the pieces of parameters inside its chunks (views, in the two weight-decay
// groups), then an all-gather gives every rank the whole updated parameters. Every piece starts at a
// multiple of kShardAlignment inside its parameter, so the kernel's vector lanes see the same elements
// as for the whole parameter: the update is bit-identical to unsharded AdamW.
//
// Checkpoints hold the full, unsharded state under AdamW's own names (gathered from every rank), so a
// run resumes with or without --zero, on any number of ranks.
#include <torch/torch.h>

#include <vector>

#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "trainer/adamw.h"

namespace mygpt {

// One flat run of parameters sharded over the ranks: a gradient bucket (--zero 1, 2) or a unit of the
// model (--zero 3, trainer/fully_sharded_model.h). Its layout places each parameter at an offset that is a
// multiple of kShardAlignment, in layout.numel elements, world_size equal chunks.
struct ShardedRun {
  BucketLayout layout;   // params: indices into the optimizer's parameter list
  torch::Tensor params;  // this rank's chunk of the flat parameters (layout.numel / N elements): updated in place
  torch::Tensor grads;   // this rank's chunk of the averaged gradients, the same elements
};

// Where a named tensor of a checkpoint is on this rank: its whole shape, and the elements
// [offset, offset + length) of it flattened that this rank holds, in `local` (a view of its shard).
struct ShardSlice {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset, length;
  torch::Tensor local;
};

class ShardedAdamW final : public StatefulPart {
 public:
  // params: the model's, in the order given to grads; decay_params and no_decay_params: the same tensors
  // split into AdamW's two groups (their order names the state in checkpoints). grads must be sharded
  // (GradientSharding::reduce_scatter or shard_only). The parameters move into flat buffers laid out as
  // the buckets, and gather_parameters() brings them whole again after each step.
  ShardedAdamW(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& decay_params,
               const std::vector<torch::Tensor>& no_decay_params, const GradientSynchronizer& grads,
               const AdamWOptions& options, Communicator& comm);
  // --zero 3: the runs' chunks are all there is of the parameters; gather_parameters() does nothing.
  ShardedAdamW(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& decay_params,
               const std::vector<torch::Tensor>& no_decay_params, std::vector<ShardedRun> runs,
               const AdamWOptions& options, Communicator& comm);

  // The AdamW of this rank's pieces: set_lr, step, forget_skipped_step, steps_taken.
  AdamW& adamw() { return adamw_; }
  // The gradients of this rank's pieces (averaged over ranks once the synchronizer finished): what to clip.
  std::vector<torch::Tensor> shard_gradients() const;
  // After the step: every rank's updated chunk to every rank.
  void gather_parameters();
  // The moments this rank holds, as slices of the checkpoint's whole tensors ("exp_avg.<group>.<index>",
  // "exp_avg_sq.<group>.<index>"): what a checkpoint writer that streams needs instead of state_dict().
  std::vector<ShardSlice> shard_slices() const;

  // A collective: every rank must call it. Only rank 0 (which writes checkpoints) gets the whole state,
  // on the CPU; the other ranks get an empty dict.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return false; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::load; }

 private:
  struct Piece {
    size_t param;        // index into params
    int group;           // AdamW group: 0 decayed, 1 not
    size_t index;        // in that group (checkpoint names), and of this piece in adamw_'s group
    size_t in_group;     // the parameter's index in its group
    size_t bucket;                       // the run
    int64_t bucket_offset, param_offset, numel;  // in the run's flat layout, in the parameter, and its length
    torch::Tensor grad;  // its slice of the gradient bucket
  };

  AdamW make_adamw(const AdamWOptions& options);

  std::vector<torch::Tensor> params_;
  std::vector<std::pair<int, size_t>> group_of_param_;  // (group, index in group) per parameter
  std::vector<torch::Tensor> flat_params_;  // --zero 1, 2: one per bucket; the parameters are views into them
  std::vector<ShardedRun> runs_;
  std::vector<Piece> pieces_;
  Communicator& comm_;
  AdamW adamw_;
};

}  // namespace mygpt
