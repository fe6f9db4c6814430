// Gloo backend over c10d::ProcessGroupGloo. Its header needs Gloo's headers, which the torch wheel does
// not ship; Debian's libgloo-dev provides them, and only the layouts that cross into libtorch's own Gloo
// matter: ProcessGroupGloo and its Options hold Gloo objects only behind shared pointers, and we call
// nothing of Gloo's ourselves (tests/launch/gloo_collectives_test.sh checks every collective we use
// across processes against the expected values).
#include "distributed/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <stdexcept>

namespace mygpt {
namespace {

// Waits for a Gloo work item, naming what failed (main prints the first line; MYGPT_FULL_ERRORS=1 the rest).
void finish(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
  try {
    work->wait();
  } catch (const c10::Error& e) {
    throw std::runtime_error(std::string("Gloo ") + what + " failed: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("Gloo ") + what + " failed: " + e.what());
  }
}

class GlooPending final : public PendingCollective {
 public:
  GlooPending(c10::intrusive_ptr<c10d::Work> work, torch::Tensor tensor, double divide_by)
      : work_(std::move(work)), tensor_(std::move(tensor)), divide_by_(divide_by) {}
  void wait() override {
    finish(work_, "all-reduce");
    if (divide_by_ == 1.0) return;
    // An integer average rounds toward zero, as the MPI backend's does.
    if (c10::isIntegralType(tensor_.scalar_type(), /*includeBool=*/false)) {
      tensor_.div_(static_cast<int64_t>(divide_by_), "trunc");
    } else {
      tensor_.div_(divide_by_);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  torch::Tensor tensor_;
  double divide_by_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                   std::chrono::milliseconds timeout)
      : rank_(rank), size_(world_size) {
    // create_default: the device Gloo's own defaults (and GLOO_SOCKET_IFNAME) choose, as PyTorch does.
    auto options = c10d::ProcessGroupGloo::Options::create_default(timeout);
    try {
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
    } catch (const c10::Error& e) {
      throw std::runtime_error(std::string("Gloo could not connect the ranks: ") + e.what_without_backtrace());
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend_name() const override { return "gloo"; }
  using Communicator::all_reduce;
  using Communicator::broadcast;

  void all_reduce(torch::Tensor& tensor, ReduceOp op) override { all_reduce_async(tensor, op)->wait(); }

  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor tensor, ReduceOp op) override {
    require_cpu(tensor);
    // Gloo has no average: a sum, divided once it is there.
    c10d::AllreduceOptions options;
    options.reduceOp = op == ReduceOp::Max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    std::vector<at::Tensor> tensors{tensor};
    auto work = group_->allreduce(tensors, options);
    return std::make_unique<GlooPending>(std::move(work), tensor, op == ReduceOp::Average ? size_ : 1.0);
  }

  void broadcast(torch::Tensor& tensor, int root) override {
    require_cpu(tensor);
    c10d::BroadcastOptions options;
    options.rootRank = root;
    std::vector<at::Tensor> tensors{tensor};
    finish(group_->broadcast(tensors, options), "broadcast");
  }

  void barrier() override { finish(group_->barrier(), "barrier"); }

 private:
  static void require_cpu(const torch::Tensor& t) {
    if (!t.device().is_cpu() || !t.is_contiguous()) throw std::logic_error("Gloo backend needs contiguous CPU tensors");
  }

  int rank_, size_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int world_size, std::chrono::milliseconds timeout) {
  return std::make_unique<GlooCommunicator>(store, rank, world_size, timeout);
}

}  // namespace mygpt
