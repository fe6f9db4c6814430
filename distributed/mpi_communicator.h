#pragma once
// Communicator for CPU tensors over MPI. Floating-point sums are added in rank order (see
// ordered_reduce_scatter), so they are the same bit for bit whichever collective carries them.
//
// Every MPI call runs on one dedicated communication thread. Blocking calls hand their work to it and
// wait; all_reduce_async returns at once, so a gradient bucket is reduced while backward goes on.
// (Open MPI's non-blocking collectives only progress inside MPI calls, which the training thread does
// not make during backward; a thread of our own gives real overlap.)
//
// With a timeout, each collective is started non-blocking (MPI_I*) and polled with MPI_Test against its
// deadline, the rule of the NCCL watchdog (collective_watchdog.h): unfinished timeout seconds after this
// rank started it, on_failure gets one line naming it and ends the job (a stopped or dead peer would
// otherwise block a blocking MPI call forever). Without one (0), the calls block.
#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/communicator.h"

namespace mygpt {

class MpiCommunicator final : public Communicator {
 public:
  // comm is duplicated, so our traffic never mixes with other users of the same communicator.
  // With use_thread false (MPI without MPI_THREAD_SERIALIZED), calls run synchronously on the caller.
  // on_failure should end the job; unset, a timeout throws std::runtime_error from the collective.
  MpiCommunicator(MPI_Comm comm, bool use_thread, double timeout_seconds = 0,
                  std::function<void(const std::string&)> on_failure = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend_name() const override { return "mpi"; }

  void all_reduce(torch::Tensor& tensor, ReduceOp op) override;
  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor tensor, ReduceOp op) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void barrier() override;
  std::unique_ptr<PendingCollective> reduce_scatter_async(torch::Tensor full, ReduceOp op) override;
  std::unique_ptr<PendingCollective> all_gather_async(torch::Tensor full) override;
  torch::Tensor gather_to_root(const torch::Tensor& mine, int root) override;
  using Communicator::all_reduce;
  using Communicator::broadcast;

 private:
  std::future<void> submit(std::function<void()> work);
  void run_worker();
  // Waits for a started collective: blocking without a timeout, else polled against the deadline.
  void complete(MPI_Request& request, const char* what);
  void reduce_now(torch::Tensor& tensor, ReduceOp op);
  void ordered_reduce_scatter(torch::Tensor& full, const std::vector<int>& counts, ReduceOp op);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool use_thread_;
  double timeout_seconds_;
  std::function<void(const std::string&)> on_failure_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace mygpt
