// NCCL backend. Collectives run on LibTorch's current CUDA stream, except the *_async ones, which run
// on a side stream so that gradient buckets are reduced while backward keeps computing. The host never
// waits for a collective here: completion is ordered on the GPU with events, and one watchdog thread
// (nccl_watchdog.h) turns a collective that hangs or fails into the end of the job.
#include "distributed/nccl_communicator.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <stdexcept>

#include "distributed/deadline_poll.h"
#include "distributed/nccl_watchdog.h"

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

// Completion of a collective on the side stream: wait() orders the current stream after it.
class NcclPending final : public PendingCollective {
 public:
  NcclPending(std::shared_ptr<CudaEvent> done, const NcclWatchdog& watchdog, c10::DeviceIndex device)
      : done_(std::move(done)), watchdog_(watchdog), device_(device) {}
  void wait() override {
    if (watchdog_.failed()) throw std::runtime_error("the NCCL communicator was aborted");
    check_cuda(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(device_).stream(), done_->get(), 0),
               "cudaStreamWaitEvent");
  }

 private:
  std::shared_ptr<CudaEvent> done_;
  const NcclWatchdog& watchdog_;
  c10::DeviceIndex device_;
};

// A non-blocking communicator's call may return before its work is enqueued: true once it is (or the
// initialization has finished), false while in progress; throws on an error.
bool nccl_state_done(ncclResult_t state, const char* what) {
  if (state == ncclSuccess) return true;
  if (state == ncclInProgress) return false;
  throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(state));
}
// A communicator that no other thread sees yet (its initialization).
bool nccl_done(ncclComm_t comm, const char* what) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
  return nccl_state_done(queried != ncclSuccess ? queried : state, what);
}

// Two ranks on one physical GPU (a launcher that showed every task the same single GPU) would deadlock
// or fail deep inside NCCL: compare the GPUs' UUIDs across ranks first.
void require_one_rank_per_gpu(Communicator& bootstrap, int device_index) {
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device_index), "cudaGetDeviceProperties");
  auto uuid = torch::empty({static_cast<int64_t>(sizeof properties.uuid.bytes)}, torch::kByte);
  std::memcpy(uuid.data_ptr(), properties.uuid.bytes, sizeof properties.uuid.bytes);
  const torch::Tensor all = bootstrap.gather_rows(uuid);
  for (int64_t a = 0; a < all.size(0); ++a) {
    for (int64_t b = a + 1; b < all.size(0); ++b) {
      if (torch::equal(all[a], all[b])) {
        throw std::invalid_argument("ranks " + std::to_string(a) + " and " + std::to_string(b) +
                                    " would share one GPU: start at most one rank per GPU");
      }
    }
  }
}

ncclComm_t init_comm(Communicator& bootstrap, int device_index, double timeout_seconds) {
  // This process drives one GPU: make it current for everything that follows (streams, NCCL).
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
  require_one_rank_per_gpu(bootstrap, device_index);
  ncclUniqueId id;
  if (bootstrap.rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error("ncclGetUniqueId failed");
  auto id_bytes = torch::empty({static_cast<int64_t>(sizeof(id))}, torch::kByte);
  std::memcpy(id_bytes.data_ptr(), &id, sizeof(id));
  bootstrap.broadcast(id_bytes, 0);
  std::memcpy(&id, id_bytes.data_ptr(), sizeof(id));
  // Non-blocking: a blocking init waits forever for a rank that never comes (the watchdog does not
  // exist yet). This one returns at once and is polled until done or --comm-timeout, then aborted.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t result = ncclCommInitRankConfig(&comm, bootstrap.world_size(), id, bootstrap.rank(), &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    throw std::runtime_error(std::string("ncclCommInitRankConfig failed: ") + ncclGetErrorString(result));
  }
  try {
    poll_until_done([&] { return nccl_done(comm, "NCCL initialization"); }, timeout_seconds, "NCCL initialization");
  } catch (...) {
    ncclCommAbort(comm);  // frees what the unfinished initialization holds, once, on any failure
    throw;
  }
  return comm;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device_index, double timeout_seconds,
                   std::function<void(const std::string&)> on_failure)
      : rank_(bootstrap.rank()),
        size_(bootstrap.world_size()),
        device_(static_cast<c10::DeviceIndex>(device_index)),
        comm_(init_comm(bootstrap, device_index, timeout_seconds), timeout_seconds),
        timeout_seconds_(timeout_seconds),
        watchdog_(comm_, device_index, timeout_seconds, std::move(on_failure)),
        side_stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend_name() const override { return "nccl"; }
  using Communicator::all_reduce;
  using Communicator::broadcast;

  void all_reduce(torch::Tensor& tensor, ReduceOp op) override {
    require_cuda(tensor);
    const auto stream = c10::cuda::getCurrentCUDAStream(device_).stream();
    auto ready = record(stream);
    check(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor),
                        nccl_op(op), comm_.get(), stream),
          "ncclAllReduce");
    watch(std::move(ready), stream, "all-reduce");
  }

  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor tensor, ReduceOp op) override {
    auto [stream, ready] = side_stream_after_current(tensor);
    check(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor),
                        nccl_op(op), comm_.get(), stream),
          "ncclAllReduce");
    return std::make_unique<NcclPending>(watch(std::move(ready), stream, "gradient bucket all-reduce"), watchdog_,
                                         device_);
  }

  // In place: NCCL's in-place forms are exactly "receive buffer = this rank's chunk of the send buffer".
  std::unique_ptr<PendingCollective> reduce_scatter_async(torch::Tensor full, ReduceOp op) override {
    const torch::Tensor mine = chunk_of(full);
    auto [stream, ready] = side_stream_after_current(full);
    check(ncclReduceScatter(full.data_ptr(), mine.data_ptr(), static_cast<size_t>(mine.numel()), nccl_type(full),
                            nccl_op(op), comm_.get(), stream),
          "ncclReduceScatter");
    return std::make_unique<NcclPending>(watch(std::move(ready), stream, "gradient bucket reduce-scatter"), watchdog_,
                                         device_);
  }

  std::unique_ptr<PendingCollective> all_gather_async(torch::Tensor full) override {
    const torch::Tensor mine = chunk_of(full);
    auto [stream, ready] = side_stream_after_current(full);
    check(ncclAllGather(mine.data_ptr(), full.data_ptr(), static_cast<size_t>(mine.numel()), nccl_type(full),
                        comm_.get(), stream),
          "ncclAllGather");
    return std::make_unique<NcclPending>(watch(std::move(ready), stream, "parameter all-gather"), watchdog_, device_);
  }

  void broadcast(torch::Tensor& tensor, int root) override {
    require_cuda(tensor);
    const auto stream = c10::cuda::getCurrentCUDAStream(device_).stream();
    auto ready = record(stream);
    check(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor),
                        root, comm_.get(), stream),
          "ncclBroadcast");
    watch(std::move(ready), stream, "broadcast");
  }

  void barrier() override {
    // A one-element all-reduce that the host waits for: every rank has reached this point. A hang here
    // is the watchdog's to end.
    auto token = torch::zeros({1}, torch::TensorOptions().device(torch::kCUDA, device_));
    all_reduce(token, ReduceOp::Sum);
    check_cuda(cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(device_).stream()), "barrier");
    if (watchdog_.failed()) throw std::runtime_error("the NCCL communicator was aborted");
  }

 private:
  static std::shared_ptr<CudaEvent> record(cudaStream_t stream) {
    auto event = std::make_shared<CudaEvent>();
    check_cuda(cudaEventRecord(event->get(), stream), "cudaEventRecord");
    return event;
  }
  // The side stream, ordered after what the compute stream wrote into the tensor so far, and the event
  // that marks it: once the writes are there the collective could start (the watchdog's clock starts then).
  std::pair<cudaStream_t, std::shared_ptr<CudaEvent>> side_stream_after_current(const torch::Tensor& tensor) {
    require_cuda(tensor);
    auto ready = record(c10::cuda::getCurrentCUDAStream(device_).stream());
    check_cuda(cudaStreamWaitEvent(side_stream_.stream(), ready->get(), 0), "cudaStreamWaitEvent");
    // Tell the caching allocator the tensor is in use on the side stream too.
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), side_stream_);
    return {side_stream_.stream(), std::move(ready)};
  }
  // Hands the collective just enqueued on `stream` (after `ready`) to the watchdog; returns its end.
  std::shared_ptr<CudaEvent> watch(std::shared_ptr<CudaEvent> ready, cudaStream_t stream, const char* what) {
    auto done = record(stream);
    watchdog_.watch(std::move(ready), done, what);
    return done;
  }
  void check(ncclResult_t result, const char* what) {
    if (result == ncclSuccess) return;
    if (result == ncclInProgress) {
      // Non-blocking: no other NCCL call on the communicator until this one is enqueued (NCCL's rule).
      try {
        poll_until_done(
            [&] {
              if (comm_.aborted()) throw std::runtime_error("the NCCL communicator was aborted");
              return nccl_state_done(comm_.async_error(), what);
            },
            timeout_seconds_, what);
        return;
      } catch (...) {
        comm_.abort_on_close();
        throw;
      }
    }
    comm_.abort_on_close();
    const std::string detail = ncclGetLastError(comm_.get());
    throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(result) +
                             (detail.empty() ? "" : " (" + detail + ")"));
  }
  void require_cuda(const torch::Tensor& t) const {
    if (watchdog_.failed()) throw std::runtime_error("the NCCL communicator was aborted");
    if (!t.is_cuda() || !t.is_contiguous()) throw std::logic_error("NCCL backend needs contiguous CUDA tensors");
  }

  int rank_, size_;
  c10::DeviceIndex device_;
  NcclComm comm_;  // destroyed after the watchdog (members go in reverse order)
  double timeout_seconds_;
  NcclWatchdog watchdog_;
  c10::cuda::CUDAStream side_stream_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device_index, double timeout_seconds,
                                                     std::function<void(const std::string&)> on_failure) {
  return std::make_unique<NcclCommunicator>(bootstrap, device_index, timeout_seconds, std::move(on_failure));
}

}  // namespace mygpt
