#include "distributed/mpi_communicator.h"

#include <stdexcept>

namespace mygpt {
namespace {

MPI_Datatype mpi_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat:
      return MPI_FLOAT;
    case torch::kDouble:
      return MPI_DOUBLE;
    case torch::kLong:
      return MPI_INT64_T;
    case torch::kInt:
      return MPI_INT32_T;
    case torch::kByte:
      return MPI_UINT8_T;
    default:
      throw std::logic_error(std::string("MPI backend cannot reduce tensors of type ") +
                             c10::toString(t.scalar_type()));
  }
}

void require_cpu_contiguous(const torch::Tensor& t) {
  if (!t.device().is_cpu() || !t.is_contiguous()) {
    throw std::logic_error("MPI backend needs contiguous CPU tensors");
  }
}

void check(int result, const char* what) {
  if (result != MPI_SUCCESS) {
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(result, message, &length);
    throw std::runtime_error(std::string(what) + " failed: " + std::string(message, static_cast<size_t>(length)));
  }
}

class FuturePending final : public PendingCollective {
 public:
  explicit FuturePending(std::future<void> done) : done_(std::move(done)) {}
  void wait() override { done_.get(); }  // rethrows an error of the communication thread

 private:
  std::future<void> done_;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool use_thread) : use_thread_(use_thread) {
  check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  // Errors come back as codes that we turn into exceptions with MPI's message.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if (use_thread_) worker_ = std::thread([this] { run_worker(); });
}

MpiCommunicator::~MpiCommunicator() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    worker_.join();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::run_worker() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // exceptions land in the task's future
  }
}

std::future<void> MpiCommunicator::submit(std::function<void()> work) {
  std::packaged_task<void()> task(std::move(work));
  auto done = task.get_future();
  if (!use_thread_) {
    task();
    return done;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  return done;
}

void MpiCommunicator::reduce_now(torch::Tensor& tensor, ReduceOp op) {
  const MPI_Op mpi_op = op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
  check(
      MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()), mpi_type(tensor), mpi_op, comm_),
      "MPI_Allreduce");
  // Integer tensors keep their type (as ncclAvg does): true division would need a float result.
  if (op == ReduceOp::Average) tensor.is_floating_point() ? tensor.div_(size_) : tensor.div_(size_, "trunc");
}

void MpiCommunicator::all_reduce(torch::Tensor& tensor, ReduceOp op) { all_reduce_async(tensor, op)->wait(); }

std::unique_ptr<PendingCollective> MpiCommunicator::all_reduce_async(torch::Tensor tensor, ReduceOp op) {
  require_cpu_contiguous(tensor);
  if (tensor.numel() > std::numeric_limits<int>::max()) throw std::logic_error("tensor too large for one MPI call");
  return std::make_unique<FuturePending>(submit([this, tensor, op]() mutable { reduce_now(tensor, op); }));
}

void MpiCommunicator::broadcast(torch::Tensor& tensor, int root) {
  require_cpu_contiguous(tensor);
  submit([&] {
    check(MPI_Bcast(tensor.data_ptr(), static_cast<int>(tensor.numel()), mpi_type(tensor), root, comm_), "MPI_Bcast");
  }).get();
}

void MpiCommunicator::barrier() {
  submit([this] { check(MPI_Barrier(comm_), "MPI_Barrier"); }).get();
}

}  // namespace mygpt
