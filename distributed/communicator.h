#pragma once
// The one interface through which the trainer talks to other ranks. Backends (local, MPI, NCCL) live
// beside it in distributed/; the trainer never knows which one it holds.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace mygpt {

enum class ReduceOp { Sum, Average, Max };

// An operation in flight. wait() returns once the result is in the tensor (for NCCL: once it is ordered
// before later work on the current CUDA stream). Errors surface from wait() as exceptions.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;
  // False for the local backend, whose collectives are no-ops: gradient buckets need not be reduced.
  // A real backend with one rank (mpirun -np 1) communicates, so it runs the path of a larger job.
  virtual bool communicates() const { return true; }

  // In place, on a contiguous tensor. Average divides the sum by world_size().
  virtual void all_reduce(torch::Tensor& tensor, ReduceOp op) = 0;
  // Starts an in-place all-reduce and returns at once, so communication can overlap computation.
  virtual std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor tensor, ReduceOp op) = 0;
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;

  // The two halves of an all-reduce, for sharded optimizer state (--zero 1). Both work in place on
  // `full`, a contiguous tensor of world_size() equal chunks (numel divisible by world_size()):
  // reduce_scatter leaves the reduction of every rank's chunk rank() in this rank's chunk rank() (the other
  // chunks are left undefined); all_gather copies every rank's chunk rank() into the same chunk on every
  // rank. As with all_reduce_async, the result is there once wait() returns. The defaults are built
  // from all_reduce_async (correct, twice the traffic); the MPI and NCCL backends override them.
  virtual std::unique_ptr<PendingCollective> reduce_scatter_async(torch::Tensor full, ReduceOp op);
  virtual std::unique_ptr<PendingCollective> all_gather_async(torch::Tensor full);
  // This rank's chunk of such a tensor (a view).
  torch::Tensor chunk_of(const torch::Tensor& full) const;

  // All-reduce and broadcast of a list of tensors, packed into one flat buffer (one collective, not
  // many); the tensors are written in place.
  void all_reduce(std::vector<torch::Tensor>& tensors, ReduceOp op);
  void broadcast(std::vector<torch::Tensor>& tensors, int root);
  // Row r of the result is rank r's tensor, flattened (every rank passes the same numel). Built from
  // one all-reduce of a zero-padded table, so no gather primitive is needed from the backends.
  torch::Tensor gather_rows(const torch::Tensor& mine);
  // Every rank's `mine` (any shape, flattened; any length, 0 included; one dtype and device kind on all
  // ranks) to rank `root`, concatenated in rank order; the other ranks get an undefined tensor. No rank
  // but the root holds more than its own piece and one other (checkpoints stream sharded state through
  // it one tensor at a time). The default sends each rank's piece in turn by broadcast, after the lengths
  // in one small all-reduce; MPI overrides it with a gather.
  virtual torch::Tensor gather_to_root(const torch::Tensor& mine, int root);
};

// World size 1: every collective is the identity.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "local"; }
  bool communicates() const override { return false; }
  void all_reduce(torch::Tensor&, ReduceOp) override {}
  using Communicator::broadcast;
  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor, ReduceOp) override;
  void broadcast(torch::Tensor&, int) override {}
  void barrier() override {}
  using Communicator::all_reduce;
};

}  // namespace mygpt
