#pragma once
// ZeRO stage 1 (--zero 1): AdamW whose moments exist only for this rank's shard of the parameters.
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

class ShardedAdamW final : public StatefulPart {
 public:
  // params: the model's, in the order given to grads; decay_params and no_decay_params: the same tensors
  // split into AdamW's two groups (their order names the state in checkpoints), but for those another
  // optimizer updates (Muon's matrices), which are in neither. grads must be sharded.
  ShardedAdamW(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& decay_params,
               const std::vector<torch::Tensor>& no_decay_params, const GradientSynchronizer& grads,
               const AdamWOptions& options, Communicator& comm);

  // The AdamW of this rank's pieces: set_lr, step, forget_skipped_step, steps_taken.
  AdamW& adamw() { return adamw_; }
  // The gradients of this rank's pieces (averaged over ranks once the synchronizer finished): what to clip,
  // the other optimizer's parameters' pieces included.
  std::vector<torch::Tensor> shard_gradients() const;
  // This rank's piece of a parameter's averaged gradient (empty where its chunks miss the parameter), so
  // that another optimizer can gather a whole gradient where it needs one (trainer/sharded_gather.h).
  ShardedTensor gradient_piece(const torch::Tensor& param) const;
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
    size_t bucket;
    int64_t bucket_offset, param_offset, numel;
    torch::Tensor grad;  // its slice of the gradient bucket
  };

  std::vector<torch::Tensor> params_;
  std::vector<std::pair<int, size_t>> group_of_param_;  // (group, index in group) per parameter
  std::vector<BucketLayout> layout_;
  std::vector<torch::Tensor> flat_params_;  // one per bucket; the parameters are views into them
  std::vector<Piece> pieces_;
  std::vector<Piece> foreign_pieces_;  // of the parameters in neither group (their gradients only)
  Communicator& comm_;
  AdamW adamw_;
};

}  // namespace mygpt
