#include "distributed/gradient_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace mygpt {

void broadcast_model_state(torch::nn::Module& model, Communicator& comm) {
  std::vector<torch::Tensor> tensors = model.parameters();
  for (const auto& b : model.buffers()) tensors.push_back(b);
  comm.broadcast(tensors, 0);
}

std::vector<std::vector<size_t>> plan_gradient_buckets(const std::vector<torch::Tensor>& params, size_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  size_t bytes = 0;
  for (size_t k = params.size(); k-- > 0;) {
    if (buckets.empty() || bytes >= bucket_bytes) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(k);
    bytes += static_cast<size_t>(params[k].numel()) * params[k].element_size();
  }
  return buckets;
}

std::vector<BucketLayout> plan_bucket_layout(const std::vector<torch::Tensor>& params, size_t bucket_bytes,
                                             int64_t alignment, int64_t chunks) {
  auto round_up = [](int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; };
  std::vector<BucketLayout> layout;
  for (auto& indices : plan_gradient_buckets(params, bucket_bytes)) {
    BucketLayout bucket;
    for (size_t k : indices) {
      bucket.numel = round_up(bucket.numel, alignment);
      bucket.offsets.push_back(bucket.numel);
      bucket.numel += params[k].numel();
    }
    bucket.used = bucket.numel;
    bucket.numel = round_up(bucket.numel, alignment * chunks);
    bucket.params = std::move(indices);
    layout.push_back(std::move(bucket));
  }
  return layout;
}

GradientSynchronizer::GradientSynchronizer(std::vector<torch::Tensor> params, Communicator& comm, size_t bucket_bytes,
                                           bool overlap, GradientSharding sharding)
    : params_(std::move(params)),
      comm_(comm),
      overlap_(overlap),
      sharding_(sharding),
      layout_(plan_bucket_layout(params_, bucket_bytes, kShardAlignment,
                                 sharding == GradientSharding::none ? 1 : comm.world_size())) {
  bucket_of_param_.resize(params_.size());
  index_in_bucket_.resize(params_.size());
  for (const BucketLayout& planned : layout_) {
    Bucket bucket;
    for (size_t i = 0; i < planned.params.size(); ++i) {
      bucket_of_param_[planned.params[i]] = buckets_.size();
      index_in_bucket_[planned.params[i]] = i;
    }
    const auto options = params_[planned.params.front()].options().requires_grad(false);
    if (sharding_ == GradientSharding::shard_only) {
      shards_.push_back(torch::zeros({planned.numel / comm.world_size()}, options));
    } else {
      bucket.flat = torch::zeros({planned.numel}, options);
      shards_.push_back(sharding_ == GradientSharding::none ? bucket.flat : comm.chunk_of(bucket.flat));
    }
    bucket.params = planned.params;
    bucket.offsets = planned.offsets;
    buckets_.push_back(std::move(bucket));
  }
  if (sharding_ != GradientSharding::shard_only) {
    for (auto& bucket : buckets_) {
      for (size_t i = 0; i < bucket.params.size(); ++i) bind(bucket, i);
    }
  }
  stats_.buckets = static_cast<int64_t>(buckets_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    // The accumulator's post hook runs once the new gradient is in param.grad: the fresh tensor backward
    // made (first micro-step of a step, see zero_grad) or its own slot, added into in place.
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[k]);
    const uintptr_t key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (sharding_ == GradientSharding::shard_only) {
            take_into_bucket(k);
            return outputs;
          }
          bind(buckets_[bucket_of_param_[k]], index_in_bucket_[k]);
          if (overlap_ && comm_.communicates()) on_gradient_ready(k);
          return outputs;
        }));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

GradientSynchronizer::~GradientSynchronizer() {
  for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
}

const torch::Tensor& GradientSynchronizer::bucket_gradients(size_t bucket) const {
  if (sharding_ == GradientSharding::shard_only) {
    throw std::logic_error("with sharded gradients (--zero 2) a rank holds only its shard of a bucket");
  }
  return buckets_[bucket].flat;
}

torch::Tensor GradientSynchronizer::slot(const Bucket& bucket, size_t i) const {
  const auto& p = params_[bucket.params[i]];
  return bucket.flat.slice(0, bucket.offsets[i], bucket.offsets[i] + p.numel()).view_as(p);
}

// Makes the parameter's gradient the view of its slot, keeping the values of a gradient it had (zero
// where it has none).
void GradientSynchronizer::bind(Bucket& bucket, size_t i) {
  torch::NoGradGuard no_grad;
  auto& p = params_[bucket.params[i]];
  const torch::Tensor view = slot(bucket, i);
  if (p.grad().defined() && p.grad().data_ptr() == view.data_ptr()) return;
  if (p.grad().defined()) {
    view.copy_(p.grad());
  } else {
    view.zero_();
  }
  p.mutable_grad() = view;
}

// Zeroing the buckets and letting backward add into them would write every gradient's memory three
// times (the zeros, then a read and a write of the sum). Instead the gradients are dropped: backward's
// first gradient of each parameter becomes param.grad as it is (autograd hands the tensor over), and the
// accumulator's hook copies it into the slot and binds the view again. Later micro-steps add into the
// slot in place; a parameter that got no gradient has its slot zeroed when its bucket is bound (launch,
// finish).
void GradientSynchronizer::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  shard_fresh_ = true;
}

void GradientSynchronizer::begin_micro_step(bool last_micro_step) {
  if (sharding_ == GradientSharding::shard_only) {
    if (micro_step_open_) end_shard_micro_step();
    micro_step_open_ = true;
    last_micro_step_ = true;  // every micro-step communicates
  } else {
    last_micro_step_ = last_micro_step;
  }
  if (last_micro_step) stats_.buckets_launched_in_backward = 0;
}

// Sharded gradients. Backward hands each parameter's gradient over as a tensor of its own; it is copied
// into its bucket (zero-filled where the bucket has padding or a parameter without a gradient) and let go.
void GradientSynchronizer::take_into_bucket(size_t param_index) {
  torch::NoGradGuard no_grad;
  Bucket& bucket = buckets_[bucket_of_param_[param_index]];
  torch::Tensor& p = params_[param_index];
  if (!bucket.flat.defined()) bucket.flat = torch::zeros({layout_[bucket_of_param_[param_index]].numel}, p.options());
  slot(bucket, index_in_bucket_[param_index]).copy_(p.grad());
  p.mutable_grad() = torch::Tensor();
  if (overlap_) on_gradient_ready(param_index);
}

void GradientSynchronizer::fold(size_t bucket_index) {
  Bucket& bucket = buckets_[bucket_index];
  if (bucket.folded) return;
  torch::NoGradGuard no_grad;
  bucket.pending->wait();
  bucket.pending.reset();
  const torch::Tensor mine = comm_.chunk_of(bucket.flat);
  if (shard_fresh_) {
    shards_[bucket_index].copy_(mine);
  } else {
    shards_[bucket_index].add_(mine);
  }
  bucket.flat = torch::Tensor();  // freed: only the shard outlives the micro-step
  bucket.ready = 0;
  bucket.folded = true;
}

void GradientSynchronizer::end_shard_micro_step() {
  torch::NoGradGuard no_grad;
  const auto start = std::chrono::steady_clock::now();
  while (next_to_launch_ < buckets_.size()) launch(buckets_[next_to_launch_++]);
  for (size_t b = 0; b < buckets_.size(); ++b) fold(b);
  next_to_launch_ = 0;
  shard_fresh_ = false;
  micro_step_open_ = false;
  stats_.wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void GradientSynchronizer::on_gradient_ready(size_t param_index) {
  if (!last_micro_step_) return;  // accumulate locally; communicate once per optimizer step
  ++buckets_[bucket_of_param_[param_index]].ready;
  const size_t launched_before = next_to_launch_;
  launch_ready_buckets_in_order();
  stats_.buckets_launched_in_backward += static_cast<int64_t>(next_to_launch_ - launched_before);
}

void GradientSynchronizer::launch_ready_buckets_in_order() {
  while (next_to_launch_ < buckets_.size() &&
         buckets_[next_to_launch_].ready == buckets_[next_to_launch_].params.size()) {
    launch(buckets_[next_to_launch_++]);
  }
}

void GradientSynchronizer::launch(Bucket& bucket) {
  if (sharding_ == GradientSharding::shard_only) {
    const auto index = static_cast<size_t>(&bucket - buckets_.data());
    // A bucket none of whose parameters got a gradient this micro-step still takes part (as zeros).
    if (!bucket.flat.defined()) bucket.flat = torch::zeros({layout_[index].numel}, shards_[index].options());
    bucket.pending = comm_.reduce_scatter_async(bucket.flat, ReduceOp::Average);
    bucket.folded = false;
    // At most two buckets in flight: the one before last is added into the shard and its buffer freed, so
    // the whole gradients never exist at once.
    if (index >= 2) fold(index - 2);
    return;
  }
  // A gradient replaced since zero_grad (not by backward, which accumulates in place) goes back into its
  // slot, so what is reduced is always what the parameters hold.
  for (size_t i = 0; i < bucket.params.size(); ++i) bind(bucket, i);
  bucket.pending = sharding_ == GradientSharding::reduce_scatter ? comm_.reduce_scatter_async(bucket.flat, ReduceOp::Average)
                                                                 : comm_.all_reduce_async(bucket.flat, ReduceOp::Average);
}

void GradientSynchronizer::finish() {
  if (sharding_ == GradientSharding::shard_only) {
    if (micro_step_open_) end_shard_micro_step();
    return;
  }
  if (!comm_.communicates()) {
    for (auto& bucket : buckets_) {  // the parameters that got no gradient
      for (size_t i = 0; i < bucket.params.size(); ++i) bind(bucket, i);
    }
    return;
  }
  torch::NoGradGuard no_grad;
  const auto start = std::chrono::steady_clock::now();
  // Buckets whose hooks did not all fire (overlap off, or unused parameters) start now, still in order.
  while (next_to_launch_ < buckets_.size()) launch(buckets_[next_to_launch_++]);
  for (auto& bucket : buckets_) {
    bucket.pending->wait();
    bucket.pending.reset();
    bucket.ready = 0;
  }
  next_to_launch_ = 0;
  stats_.wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace mygpt
