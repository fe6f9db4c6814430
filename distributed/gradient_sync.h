#pragma once
// DDP gradient synchronization (what PyTorch's DistributedDataParallel does, which LibTorch lacks).
//
// After the last micro-step of an optimizer step every rank holds the average of all ranks' gradients;
// earlier micro-steps only accumulate locally, with no communication. Gradients live in buckets of
// about bucket_bytes in reverse parameter order (the order backward produces them): each parameter's
// .grad is a view into its bucket (DDP's gradient_as_bucket_view): a step's first gradient of each
// parameter is copied in as backward makes it (no zeroing), later micro-steps accumulate straight into
// the buffers that are all-reduced, and nothing is copied out. A bucket's all-reduce starts as soon
// as its last gradient is accumulated, from an autograd hook, so communication overlaps the rest of
// backward. Buckets start strictly in order, so every rank issues the same collectives in the same
// sequence. With one rank the buckets still hold the gradients and nothing is communicated.
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <vector>

#include "distributed/communicator.h"

namespace mygpt {

// Copies rank 0's parameters and buffers to every rank (one flat broadcast), so all ranks start from
// identical weights whatever their own initialization did.
void broadcast_model_state(torch::nn::Module& model, Communicator& comm);

// Indices into params, grouped into buckets in reverse order, each closed once it reaches bucket_bytes.
std::vector<std::vector<size_t>> plan_gradient_buckets(const std::vector<torch::Tensor>& params, size_t bucket_bytes);

// Where each gradient lives in its bucket. Every parameter starts at a multiple of `alignment` elements;
// the bucket is padded to `chunks` equal chunks that are multiples of it. The synchronizer aligns to
// kShardAlignment, sharded (--zero 1) or not: sharded, a chunk boundary then cuts a parameter only at
// such a multiple, so a rank's shard is updated by the same vector lanes as the whole parameter would be
// (bit-exact); in both, the gradient norm reads a bucket as rows of that many elements, one kernel per
// bucket (trainer/gradient_norm.h). The padding costs under kShardAlignment elements per parameter.
constexpr int64_t kShardAlignment = 1024;
struct BucketLayout {
  std::vector<size_t> params;    // indices into the parameter list
  std::vector<int64_t> offsets;  // of each parameter in the flat bucket
  int64_t used = 0;              // the end of its last parameter
  int64_t numel = 0;             // with padding
};
std::vector<BucketLayout> plan_bucket_layout(const std::vector<torch::Tensor>& params, size_t bucket_bytes,
                                             int64_t alignment, int64_t chunks);

// What a rank keeps of the averaged gradients.
enum class GradientSharding {
  none,            // every rank the whole average, in the buckets (DDP, --zero 0)
  reduce_scatter,  // whole buckets, of which this rank's chunk holds the average (--zero 1)
  // Only this rank's chunk of each bucket, in a shard of its own (--zero 2): every micro-step's buckets are
  // reduce-scattered as backward fills them and added into the shard, and a bucket's buffer lives only
  // from its first gradient to the end of its reduce-scatter. (Accumulating locally and reducing once per
  // step, as DDP's no_sync does, would keep the whole gradients alive across micro-steps: stage 1's
  // memory. The price is one reduce-scatter per micro-step instead of one per step, as DeepSpeed's.)
  shard_only,
};

struct GradientSyncStats {
  double wait_ms = 0;  // time finish() spent waiting for communication (the part not overlapped)
  int64_t buckets_launched_in_backward = 0;
  int64_t buckets = 0;
};

class GradientSynchronizer {
 public:
  // params in the model's registration order. overlap=false starts every bucket only in finish() (with
  // shard_only: at the end of each micro-step). sharding: see GradientSharding; sharded, after finish()
  // only shard_gradients(b) holds this rank's chunk of the average.
  GradientSynchronizer(std::vector<torch::Tensor> params, Communicator& comm, size_t bucket_bytes = 25u << 20,
                       bool overlap = true, GradientSharding sharding = GradientSharding::none);
  ~GradientSynchronizer();
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  // Starts a step's gradients from zero; replaces optimizers' zero_grad. The gradients are dropped, and
  // each parameter's first gradient of the step is copied into its slot as backward produces it (no
  // zero-fill, no add); from finish() on every gradient is its slot's view again (zero where backward
  // gave none). A gradient that someone replaced is bound to its slot again the same way.
  void zero_grad();
  // Call before each micro-step's forward; communication happens only on the last one (shard_only: on
  // every one, and this call completes the previous micro-step's).
  void begin_micro_step(bool last_micro_step);
  // Call after the last backward of a step. Once it returns every gradient holds the cross-rank average
  // as far as later work on the device is concerned (for NCCL the host does not wait).
  void finish();
  const GradientSyncStats& last_stats() const { return stats_; }
  const std::vector<BucketLayout>& layout() const { return layout_; }
  // The whole bucket (not with shard_only, whose buckets live only inside a micro-step).
  const torch::Tensor& bucket_gradients(size_t bucket) const;
  // This rank's chunk of a bucket (the whole bucket when not sharded): elements [rank * numel / N, ...) of
  // the bucket's layout, averaged over the ranks once finish() returns.
  const torch::Tensor& shard_gradients(size_t bucket) const { return shards_[bucket]; }
  GradientSharding sharding() const { return sharding_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // of each parameter inside flat
    torch::Tensor flat;
    size_t ready = 0;
    std::unique_ptr<PendingCollective> pending;
    bool folded = true;  // shard_only: its last reduce-scatter has been added into the shard
  };
  void on_gradient_ready(size_t param_index);
  void launch_ready_buckets_in_order();
  void launch(Bucket& bucket);
  torch::Tensor slot(const Bucket& bucket, size_t i) const;
  void bind(Bucket& bucket, size_t i);
  // shard_only: a gradient that backward finished goes into its bucket (made when the bucket's first one
  // comes) and leaves the parameter; a launched bucket's reduce-scatter is waited for and added into the
  // shard, after which its buffer is freed; a micro-step ends with every bucket launched and folded.
  void take_into_bucket(size_t param_index);
  void fold(size_t bucket_index);
  void end_shard_micro_step();

  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  bool overlap_;
  GradientSharding sharding_;
  std::vector<BucketLayout> layout_;
  std::vector<Bucket> buckets_;
  std::vector<torch::Tensor> shards_;  // per bucket: this rank's chunk (a view of flat, or its own with shard_only)
  bool shard_fresh_ = true;            // shard_only: the step's first fold copies into the shards
  bool micro_step_open_ = false;       // shard_only: a micro-step began whose buckets are not all folded
  std::vector<size_t> bucket_of_param_;
  std::vector<size_t> index_in_bucket_;
  size_t next_to_launch_ = 0;
  bool last_micro_step_ = true;
  GradientSyncStats stats_;
  // Autograd's gradient accumulators hold our hooks; we keep them alive and remove the hooks on exit.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
};

}  // namespace mygpt
