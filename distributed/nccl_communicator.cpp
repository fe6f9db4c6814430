// NCCL backend. Collectives run on LibTorch's current CUDA stream, except all_reduce_async, which
// runs on a side stream so that gradient buckets are reduced while backward keeps computing.
#include "distributed/nccl_communicator.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace mygpt {
namespace {

void check_cuda(cudaError_t result, const char* what) {
  if (result != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(result));
}

ncclDataType_t nccl_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat:
      return ncclFloat32;
    case torch::kDouble:
      return ncclFloat64;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kHalf:
      return ncclFloat16;
    case torch::kLong:
      return ncclInt64;
    case torch::kInt:
      return ncclInt32;
    case torch::kByte:
      return ncclUint8;
    default:
      throw std::logic_error("NCCL backend cannot reduce this tensor type");
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Average:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
  }
  return ncclSum;
}

class NcclCommunicator;

// Completion of a collective on the side stream. wait() makes the current stream wait for it and,
// meanwhile, watches the clock and NCCL's error state so that a dead peer becomes an exception.
class NcclPending final : public PendingCollective {
 public:
  NcclPending(ncclComm_t comm, cudaEvent_t done, double timeout_seconds, c10::DeviceIndex device)
      : comm_(comm), done_(done), timeout_seconds_(timeout_seconds), device_(device) {}
  ~NcclPending() override { cudaEventDestroy(done_); }
  void wait() override;

 private:
  ncclComm_t comm_;
  cudaEvent_t done_;
  double timeout_seconds_;
  c10::DeviceIndex device_;
};

void wait_for_event(ncclComm_t comm, cudaEvent_t event, double timeout_seconds) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) check_cuda(state, "waiting for an NCCL collective");
    ncclResult_t async_error = ncclSuccess;
    ncclCommGetAsyncError(comm, &async_error);
    if (async_error != ncclSuccess && async_error != ncclInProgress) {
      ncclCommAbort(comm);
      throw std::runtime_error(std::string("NCCL error: ") + ncclGetErrorString(async_error));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_seconds > 0 && waited > timeout_seconds) {
      ncclCommAbort(comm);
      throw std::runtime_error("NCCL collective did not finish within " + std::to_string(timeout_seconds) +
                               " s: a peer rank is gone or stuck");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclPending::wait() {
  wait_for_event(comm_, done_, timeout_seconds_);
  check_cuda(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(device_).stream(), done_, 0), "cudaStreamWaitEvent");
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device_index, double timeout_seconds)
      : rank_(bootstrap.rank()),
        size_(bootstrap.world_size()),
        device_index_(device_index),
        timeout_seconds_(timeout_seconds),
        side_stream_(
            c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device_index))) {
    // This process drives one GPU: make it current for everything that follows (streams, NCCL).
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
    ncclUniqueId id;
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    auto id_bytes = torch::empty({static_cast<int64_t>(sizeof(id))}, torch::kByte);
    std::memcpy(id_bytes.data_ptr(), &id, sizeof(id));
    bootstrap.broadcast(id_bytes, 0);
    std::memcpy(&id, id_bytes.data_ptr(), sizeof(id));
    check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }

  ~NcclCommunicator() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend_name() const override { return "nccl"; }
  using Communicator::all_reduce;

  void all_reduce(torch::Tensor& tensor, ReduceOp op) override {
    require_cuda(tensor);
    auto stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index_));
    check(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor),
                        nccl_op(op), comm_, stream.stream()),
          "ncclAllReduce");
  }

  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor tensor, ReduceOp op) override {
    require_cuda(tensor);
    const auto device = static_cast<c10::DeviceIndex>(device_index_);
    auto compute = c10::cuda::getCurrentCUDAStream(device);
    // The side stream must see the gradients that the compute stream wrote into the bucket.
    cudaEvent_t ready, done;
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(ready, compute.stream()), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(side_stream_.stream(), ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);
    // Tell the caching allocator the bucket is in use on the side stream too.
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), side_stream_);
    check(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor),
                        nccl_op(op), comm_, side_stream_.stream()),
          "ncclAllReduce");
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done, side_stream_.stream()), "cudaEventRecord");
    return std::make_unique<NcclPending>(comm_, done, timeout_seconds_, device);
  }

  void broadcast(torch::Tensor& tensor, int root) override {
    require_cuda(tensor);
    auto stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index_));
    check(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor),
                        root, comm_, stream.stream()),
          "ncclBroadcast");
  }

  void barrier() override {
    // A one-element all-reduce that the host waits for: every rank has reached this point.
    auto token = torch::zeros({1}, torch::TensorOptions().device(torch::kCUDA, device_index_));
    all_reduce_async(token, ReduceOp::Sum)->wait();
    check_cuda(
        cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index_)).stream()),
        "barrier");
  }

 private:
  void check(ncclResult_t result, const char* what) {
    if (result == ncclSuccess) return;
    std::string detail = comm_ != nullptr ? ncclGetLastError(comm_) : "";
    throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(result) +
                             (detail.empty() ? "" : " (" + detail + ")"));
  }
  void require_cuda(const torch::Tensor& t) const {
    if (!t.is_cuda() || !t.is_contiguous()) throw std::logic_error("NCCL backend needs contiguous CUDA tensors");
  }

  int rank_, size_, device_index_;
  double timeout_seconds_;
  c10::cuda::CUDAStream side_stream_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device_index,
                                                     double timeout_seconds) {
  return std::make_unique<NcclCommunicator>(bootstrap, device_index, timeout_seconds);
}

}  // namespace mygpt
