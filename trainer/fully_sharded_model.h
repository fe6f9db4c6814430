#pragma once
// ZeRO stage 3 (--zero 3, what FSDP calls full sharding): every rank keeps 1/N of every parameter, of its
// gradient and (in ShardedAdamW, over this class's runs) of AdamW's state.
//
// The model is cut into units: the embeddings, each transformer block, the final norm and the head (the
// embeddings' unit again when the head is tied). Each unit's parameters live in one flat buffer laid out
// as a gradient bucket is (every parameter at a multiple of kShardAlignment, world_size equal chunks), and
// the parameters are views of it. Between uses the buffer's memory is released (its storage resized to
// nothing, as FSDP does), so only this rank's chunk, the shard, stays. Through the model's unit hooks
// (model/gpt.h, which knows nothing of ranks) a unit is all-gathered just before its forward and, from a
// hook on its outputs' gradients, again just before its backward; the next unit's gather is started as the
// current one begins (prefetch: the communicator's asynchronous all-gather, on NCCL its side stream). Its
// gradients leave the parameters as backward makes them, for a buffer of the unit's layout that is
// reduce-scattered once the unit's last gradient is in, and added into the gradient shard (every
// micro-step, as --zero 2 does); then the unit's parameters are released. A tied token embedding is one
// parameter of one unit: it is gathered from the head's backward to the embeddings' (both read it) and
// its gradient, the sum of both uses, is reduced once.
//
// The model is never whole on a rank: it comes built WeightInit::unallocated (parameters of their shapes
// with no memory, model/transformer_block.h), and each rank writes only its shard of each parameter
// (set_parameter), from the initial values drawn one parameter at a time (Gpt::for_each_initial_value:
// those a --zero 0 run starts with) or from a stored model read tensor by tensor. A model given with its
// memory (a test's, whole and identical on every rank) is sharded from it.
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "model/gpt.h"
#include "trainer/sharded_adamw.h"
#include "trainer/stateful.h"

namespace mygpt {

class FullyShardedModel {
 public:
  // model: built WeightInit::unallocated (its shards start zero: set_parameter fills them), or whole and
  // identical on every rank. Its units live on `device` (by default its parameters' device). It is sharded
  // here and stays so: only forward/loss (through the hooks) and this class read its parameters from now on.
  FullyShardedModel(Gpt model, Communicator& comm, std::optional<torch::Device> device = std::nullopt);
  ~FullyShardedModel();
  FullyShardedModel(const FullyShardedModel&) = delete;
  FullyShardedModel& operator=(const FullyShardedModel&) = delete;

  // One run per unit with parameters, for ShardedAdamW (the model's parameters() order).
  std::vector<ShardedRun> runs() const;
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  int rank() const { return comm_.rank(); }

  // The training step's gradient handling, as GradientSynchronizer's: zero_grad before the first
  // micro-step, begin_micro_step before each forward (it completes the previous micro-step's reductions),
  // finish after the last backward (every unit's gradient shard then holds the average over the ranks).
  void zero_grad();
  void begin_micro_step();
  void finish();
  // The global norm of the gradients, from the shards (their squares' sums all-reduced), adding the same
  // numbers in the same order as GradientNorm does over whole buckets: bit-identical to --zero 0's.
  torch::Tensor gradient_norm() const;
  // Whether every parameter of every rank is finite (a collective).
  bool parameters_finite();
  // The gathers of one forward, without computing: a rank that has no batch in an evaluation round runs
  // this while the others score theirs, so that every rank issues the same collectives.
  void idle_forward();

  // The whole parameters, unit by unit: fn(name, tensor) for each, while its unit is gathered (a
  // collective: every rank calls it, and every rank gets the tensors).
  void for_each_whole_parameter(const std::function<void(const std::string&, const torch::Tensor&)>& fn);
  // Sets this rank's piece of one parameter from its whole value (any device; not a collective).
  void set_parameter(const std::string& name, const torch::Tensor& whole);
  // Sets this rank's shard from whole tensors (by the model's parameter names).
  void load_whole_parameters(const std::function<const torch::Tensor&(const std::string&)>& whole);
  // The parameters this rank holds, as pieces of the checkpoint's whole tensors ("wte.weight", ...): one
  // entry per parameter in the model's order on every rank (an empty piece where this rank holds none).
  std::vector<ShardedTensor> shard_pieces() const;

 private:
  struct Unit {
    BucketLayout layout;   // params: indices into params_
    torch::Tensor full;    // layout.numel elements; its storage holds nothing unless gathered
    torch::Tensor shard;   // this rank's chunk of it, of its own: the parameters' master copy
    torch::Tensor grad_shard;
    torch::Tensor grad_buffer;  // the unit's whole gradients while its backward runs; else undefined
    std::unique_ptr<PendingCollective> gathering, reducing;
    bool gathered = false;
    size_t grads_in = 0;  // of this micro-step's backward
  };
  void gather(size_t unit);
  void prefetch(size_t unit);
  void release(size_t unit);
  void release_all();
  // A unit id of the model (model/gpt.h UnitHooks) to our unit, or -1 for one without parameters.
  int64_t unit_of(int64_t model_unit) const;
  void before_forward(int64_t model_unit);
  void after_forward(int64_t model_unit, const std::vector<torch::Tensor>& outputs);
  void before_backward(int64_t model_unit);
  void take_gradient(size_t param);
  void reduce(size_t unit);
  void fold(size_t unit);

  Gpt model_;
  Communicator& comm_;
  std::vector<torch::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<Unit> units_;
  std::vector<ShardedTensor> pieces_of_params_;  // shard_pieces(), for set_parameter
  std::vector<int64_t> unit_of_model_unit_;  // -1: no parameters
  std::vector<size_t> unit_of_param_, index_in_unit_;
  std::vector<size_t> reducing_order_;  // units whose reduce-scatter is in flight, oldest first
  int64_t model_units_;
  bool fresh_ = true;         // the step's first fold copies into the gradient shards
  bool micro_step_open_ = false;
  // The norm's pieces: runs of rows of a unit's gradient shard and where their norms go in the list of
  // every parameter's pieces (GradientNorm's order: parameters from the last, each piece in order).
  struct NormRows {
    size_t unit;
    int64_t first_row, count, position;
  };
  std::vector<NormRows> norm_rows_;
  int64_t pieces_ = 0;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
};

// The model's weights as a checkpoint keeps them (whole, by name), gathered to the writer one tensor at a
// time from the ranks' pieces: ModelState's names and shapes, so a checkpoint of --zero 3 resumes at any
// other stage and world size and back.
class FullyShardedModelState final : public StatefulPart {
 public:
  FullyShardedModelState(FullyShardedModel& sharded, Gpt model) : sharded_(sharded), model_(std::move(model)) {}
  // The buffers (every rank holds them whole); the parameters are sharded_state(), this rank's pieces,
  // which a checkpoint gathers to its writer one tensor at a time (trainer/checkpoint_entries.h).
  StateDict state_dict() const override;
  std::vector<ShardedTensor> sharded_state() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return false; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::load; }

 private:
  FullyShardedModel& sharded_;
  Gpt model_;
};

}  // namespace mygpt
