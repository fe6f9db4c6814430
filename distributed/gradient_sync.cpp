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
                                           bool overlap, bool sharded)
    : params_(std::move(params)),
      comm_(comm),
      overlap_(overlap),
      sharded_(sharded),
      layout_(plan_bucket_layout(params_, bucket_bytes, kShardAlignment, sharded ? comm.world_size() : 1)) {
  bucket_of_param_.resize(params_.size());
  index_in_bucket_.resize(params_.size());
  for (const BucketLayout& planned : layout_) {
    Bucket bucket;
    for (size_t i = 0; i < planned.params.size(); ++i) {
      bucket_of_param_[planned.params[i]] = buckets_.size();
      index_in_bucket_[planned.params[i]] = i;
    }
    bucket.flat = torch::zeros({planned.numel}, params_[planned.params.front()].options().requires_grad(false));
    bucket.params = planned.params;
    bucket.offsets = planned.offsets;
    buckets_.push_back(std::move(bucket));
  }
  for (auto& bucket : buckets_) {
    for (size_t i = 0; i < bucket.params.size(); ++i) bind(bucket, i);
  }
  stats_.buckets = static_cast<int64_t>(buckets_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    // The accumulator's post hook runs once the new gradient is in param.grad: the fresh tensor backward
    // made (first micro-step of a step, see zero_grad) or its own slot, added into in place.
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[k]);
    const uintptr_t key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
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
}

void GradientSynchronizer::begin_micro_step(bool last_micro_step) {
  last_micro_step_ = last_micro_step;
  if (last_micro_step) stats_.buckets_launched_in_backward = 0;
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
  // A gradient replaced since zero_grad (not by backward, which accumulates in place) goes back into its
  // slot, so what is reduced is always what the parameters hold.
  for (size_t i = 0; i < bucket.params.size(); ++i) bind(bucket, i);
  bucket.pending = sharded_ ? comm_.reduce_scatter_async(bucket.flat, ReduceOp::Average)
                           : comm_.all_reduce_async(bucket.flat, ReduceOp::Average);
}

void GradientSynchronizer::finish() {
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
