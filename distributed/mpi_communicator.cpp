#include "distributed/mpi_communicator.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "distributed/collective_watchdog.h"

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

// A fault for tests of a rank lost in the middle of a --zero 3 gather (tests/mpi/zero3_run_test.sh):
// MYGPT_TEST_SIGNAL_IN_ALL_GATHER=RANK:KILL|STOP:FILE makes rank RANK send itself SIGKILL (dead: no
// cleanup, as the OOM killer or a failed node leaves it) or SIGSTOP (hung: alive, silent, holding its
// connections) on the first all-gather it issues once FILE exists, while the other ranks are in it.
void signal_here_if_planted(int rank) {
  const char* spec = std::getenv("MYGPT_TEST_SIGNAL_IN_ALL_GATHER");
  if (spec == nullptr || *spec == '\0') return;
  const std::string text(spec);
  const size_t first = text.find(':'), second = first == std::string::npos ? first : text.find(':', first + 1);
  const std::string signal = second == std::string::npos ? "" : text.substr(first + 1, second - first - 1);
  if (first == 0 || text.find_first_not_of("0123456789") != first || (signal != "KILL" && signal != "STOP")) {
    throw std::invalid_argument("MYGPT_TEST_SIGNAL_IN_ALL_GATHER: expected RANK:KILL|STOP:FILE, got '" + text + "'");
  }
  if (std::stoi(text.substr(0, first)) == rank && std::filesystem::exists(text.substr(second + 1))) {
    std::raise(signal == "KILL" ? SIGKILL : SIGSTOP);
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

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool use_thread, double timeout_seconds,
                                 std::function<void(const std::string&)> on_failure)
    : use_thread_(use_thread), timeout_seconds_(timeout_seconds), on_failure_(std::move(on_failure)) {
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

void MpiCommunicator::complete(MPI_Request& request, const char* what) {
  if (timeout_seconds_ <= 0) {
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), what);
    return;
  }
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds_));
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (clock::now() > deadline) {
      const std::string message = collective_timeout_message(what, timeout_seconds_);
      if (on_failure_) on_failure_(message);
      throw std::runtime_error(message);
    }
    // Open MPI progresses a non-blocking collective only inside MPI calls, so the poll does not sleep
    // (a blocking call spins as well); yielding leaves the core to the training thread when it needs it.
    std::this_thread::yield();
  }
}

// Floating-point sums are added in rank order, x0 + x1 + x2 + ..., whatever algorithm MPI would pick for
// the message size: a gradient bucket's reduction is then the same bit for bit whether it is all-reduced
// or reduce-scattered (--zero 1), and whatever the bucket size. Rank r receives every rank's part r
// (counts[r] elements, one MPI_Alltoallv) and reduces it: the traffic of a reduce-scatter.
namespace {

// Where each rank's part starts, for parts of `counts` elements laid end to end.
std::vector<int> displacements_of(const std::vector<int>& counts) {
  std::vector<int> displacements(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) displacements[r] = displacements[r - 1] + counts[r - 1];
  return displacements;
}

}  // namespace

void MpiCommunicator::ordered_reduce_scatter(torch::Tensor& full, const std::vector<int>& counts, ReduceOp op) {
  const std::vector<int> displacements = displacements_of(counts);
  const int mine = counts[static_cast<size_t>(rank_)];
  auto received = torch::empty({size_, mine}, full.options());
  std::vector<int> received_counts(counts.size(), mine), received_displacements(counts.size());
  for (size_t r = 0; r < counts.size(); ++r) received_displacements[r] = static_cast<int>(r) * mine;
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Ialltoallv(full.data_ptr(), counts.data(), displacements.data(), mpi_type(full), received.data_ptr(),
                       received_counts.data(), received_displacements.data(), mpi_type(full), comm_, &request),
        "MPI_Ialltoallv");
  complete(request, "MPI_Alltoallv");
  auto out = full.slice(0, displacements[static_cast<size_t>(rank_)], displacements[static_cast<size_t>(rank_)] + mine);
  out.copy_(received[0]);
  for (int r = 1; r < size_; ++r) out.add_(received[r]);
  if (op == ReduceOp::Average) out.div_(size_);
}

void MpiCommunicator::reduce_now(torch::Tensor& tensor, ReduceOp op) {
  if (tensor.is_floating_point() && op != ReduceOp::Max) {
    // The ordered reduce-scatter of near-equal parts, then every part to every rank.
    const int n = static_cast<int>(tensor.numel());
    std::vector<int> counts(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) counts[static_cast<size_t>(r)] = n / size_ + (r < n % size_ ? 1 : 0);
    torch::Tensor flat = tensor.view({-1});  // contiguous: the same memory
    ordered_reduce_scatter(flat, counts, op);
    const std::vector<int> displacements = displacements_of(counts);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, tensor.data_ptr(), counts.data(), displacements.data(),
                          mpi_type(tensor), comm_, &request),
          "MPI_Iallgatherv");
    complete(request, "MPI_Allgatherv");
    return;
  }
  const MPI_Op mpi_op = op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()), mpi_type(tensor), mpi_op,
                       comm_, &request),
        "MPI_Iallreduce");
  complete(request, "MPI_Allreduce");
  // Integer tensors keep their type (as ncclAvg does): true division would need a float result.
  if (op == ReduceOp::Average) tensor.is_floating_point() ? tensor.div_(size_) : tensor.div_(size_, "trunc");
}

void MpiCommunicator::all_reduce(torch::Tensor& tensor, ReduceOp op) { all_reduce_async(tensor, op)->wait(); }

std::unique_ptr<PendingCollective> MpiCommunicator::all_reduce_async(torch::Tensor tensor, ReduceOp op) {
  require_cpu_contiguous(tensor);
  if (tensor.numel() > std::numeric_limits<int>::max()) throw std::logic_error("tensor too large for one MPI call");
  return std::make_unique<FuturePending>(submit([this, tensor, op]() mutable { reduce_now(tensor, op); }));
}

std::unique_ptr<PendingCollective> MpiCommunicator::reduce_scatter_async(torch::Tensor full, ReduceOp op) {
  require_cpu_contiguous(full);
  if (full.numel() > std::numeric_limits<int>::max()) throw std::logic_error("tensor too large for one MPI call");
  torch::Tensor mine = chunk_of(full);
  return std::make_unique<FuturePending>(submit([this, full, mine, op]() mutable {
    const int count = static_cast<int>(mine.numel());
    if (full.is_floating_point() && op != ReduceOp::Max) {
      ordered_reduce_scatter(full, std::vector<int>(static_cast<size_t>(size_), count), op);
      return;
    }
    // In place, MPI reads the whole buffer and writes this rank's reduced chunk at its start.
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ireduce_scatter_block(MPI_IN_PLACE, full.data_ptr(), count, mpi_type(full),
                                    op == ReduceOp::Max ? MPI_MAX : MPI_SUM, comm_, &request),
          "MPI_Ireduce_scatter_block");
    complete(request, "MPI_Reduce_scatter_block");
    if (rank_ != 0) mine.copy_(full.slice(0, 0, count));  // chunks do not overlap: rank_ * count >= count
    if (op == ReduceOp::Average) mine.div_(size_, "trunc");
  }));
}

std::unique_ptr<PendingCollective> MpiCommunicator::all_gather_async(torch::Tensor full) {
  require_cpu_contiguous(full);
  signal_here_if_planted(rank_);
  const int count = static_cast<int>(chunk_of(full).numel());
  return std::make_unique<FuturePending>(submit([this, full, count]() mutable {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full.data_ptr(), count, mpi_type(full), comm_, &request),
          "MPI_Iallgather");
    complete(request, "MPI_Allgather");
  }));
}

torch::Tensor MpiCommunicator::gather_to_root(const torch::Tensor& mine, int root) {
  const torch::Tensor flat = mine.reshape({-1}).contiguous();
  require_cpu_contiguous(flat);
  // Bytes, so any dtype travels; every rank learns every length, so all take the same path below.
  const int64_t bytes = flat.numel() * static_cast<int64_t>(flat.element_size());
  std::vector<int64_t> lengths(static_cast<size_t>(size_));
  submit([&] {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&bytes, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, comm_, &request), "MPI_Iallgather");
    complete(request, "MPI_Allgather");
  }).get();
  int64_t total = 0;
  for (const int64_t length : lengths) total += length;
  // MPI counts in int: a larger tensor goes piece by piece (the broadcasts of the default).
  if (total > std::numeric_limits<int>::max()) return Communicator::gather_to_root(mine, root);
  std::vector<int> counts(lengths.begin(), lengths.end());
  const std::vector<int> displacements = displacements_of(counts);
  torch::Tensor gathered;
  if (rank_ == root) gathered = torch::empty({total / static_cast<int64_t>(flat.element_size())}, flat.options());
  submit([&] {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Igatherv(flat.data_ptr(), static_cast<int>(bytes), MPI_BYTE, rank_ == root ? gathered.data_ptr() : nullptr,
                       counts.data(), displacements.data(), MPI_BYTE, root, comm_, &request),
          "MPI_Igatherv");
    complete(request, "MPI_Gatherv");
  }).get();
  return gathered;
}

void MpiCommunicator::broadcast(torch::Tensor& tensor, int root) {
  require_cpu_contiguous(tensor);
  submit([&] {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibcast(tensor.data_ptr(), static_cast<int>(tensor.numel()), mpi_type(tensor), root, comm_, &request),
          "MPI_Ibcast");
    complete(request, "MPI_Bcast");
  }).get();
}

void MpiCommunicator::barrier() {
  submit([this] {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    complete(request, "MPI_Barrier");
  }).get();
}

}  // namespace mygpt
