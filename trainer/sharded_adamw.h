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
// Checkpoints hold the full, unsharded state under AdamW's own names (streamed tensor by tensor from every
// rank's pieces to the writer), so a run resumes with or without --zero, on any number of ranks.
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

class ShardedAdamW final : public StatefulPart {
 public:
  // params: the model's, in the order given to grads; decay_params and no_decay_params: the same tensors
  // split into AdamW's two groups (their order names the state in checkpoints), but for those another
  // optimizer updates (Muon's matrices), which are in neither. grads must be sharded
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
  // The gradients of this rank's pieces (averaged over ranks once the synchronizer finished): what to clip,
  // the other optimizer's parameters' pieces included.
  std::vector<torch::Tensor> shard_gradients() const;
  // This rank's piece of a parameter's averaged gradient (empty where its chunks miss the parameter), so
  // that another optimizer can gather a whole gradient where it needs one (trainer/sharded_gather.h).
  ShardedTensor gradient_piece(const torch::Tensor& param) const;
  // This rank's piece of a parameter itself (a view of its shard, updated in place), for another optimizer
  // that updates a parameter only --zero 3 holds in pieces.
  ShardedTensor parameter_piece(const torch::Tensor& param) const;
  // Whether the parameters are whole on every rank after gather_parameters() (--zero 1, 2), or only
  // their shards exist (--zero 3).
  bool parameters_whole() const { return !flat_params_.empty(); }
  // After the step: every rank's updated chunk to every rank.
  void gather_parameters();

  // A collective: every rank must call it. The step counts, as every rank holds them alike; the moments are
  // sharded_state(), this rank's pieces of them under AdamW's names of the whole tensors.
  StateDict state_dict() const override;
  std::vector<ShardedTensor> sharded_state() const override;
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
  ShardedTensor piece_of(const torch::Tensor& param, bool gradient) const;

  std::vector<torch::Tensor> params_;
  std::vector<std::pair<int, size_t>> group_of_param_;  // (group, index in group) per parameter
  std::vector<torch::Tensor> flat_params_;  // --zero 1, 2: one per bucket; the parameters are views into them
  std::vector<ShardedRun> runs_;
  std::vector<Piece> pieces_;
  std::vector<Piece> foreign_pieces_;  // of the parameters in neither group (their gradients only)
  Communicator& comm_;
  AdamW adamw_;
};

}  // namespace mygpt
