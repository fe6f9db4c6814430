#include "distributed/job_communicators.h"

#include <c10/util/Logging.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <stdexcept>

#include "common/strprintf.h"
#include "distributed/gloo_communicator.h"
#include "distributed/mpi_communicator.h"
#include "distributed/nccl_communicator.h"
#include "distributed/store_rendezvous.h"

namespace mygpt {

namespace {

std::chrono::milliseconds timeout_of(double seconds) {
  // 0 means no limit: thirty days stands in for it (the store and Gloo take a finite duration).
  const double limited = seconds > 0 ? seconds : 30.0 * 24 * 3600;
  return std::chrono::milliseconds(static_cast<int64_t>(limited * 1000.0));
}

// While ranks meet, c10d logs each failed connection attempt as a warning with a C++ stack trace
// (hundreds of lines while rank 0 is not up, or never comes) and its own error before it throws; the
// job's one line says what they say. So they are silenced then, unless --verbose or TORCH_CPP_LOG_LEVEL
// asks for them. A failed rendezvous leaves them silenced: a request still blocked on a thread of its
// own (bounded_call.h) must not print after the job's line.
class QuietLibTorchLogs {
 public:
  explicit QuietLibTorchLogs(bool keep) : saved_(FLAGS_caffe2_log_level) {
    if (!keep && std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr) {
      FLAGS_caffe2_log_level = std::max(saved_, 3);  // c10's FATAL: warnings and errors are not printed
    }
  }
  ~QuietLibTorchLogs() {
    if (std::uncaught_exceptions() == 0) FLAGS_caffe2_log_level = saved_;
  }
  QuietLibTorchLogs(const QuietLibTorchLogs&) = delete;
  QuietLibTorchLogs& operator=(const QuietLibTorchLogs&) = delete;

 private:
  int saved_;
};

}  // namespace

bool trains_alone_on_device(int world_size, const torch::Device& device) {
  if (!device.is_mps()) return false;
  if (world_size > 1) {
    throw std::invalid_argument("--device mps trains one rank only, and this job has " + std::to_string(world_size) +
                                " (no communicator here carries MPS tensors): start one rank, or use --device cpu");
  }
  return true;
}

JobCommunicators::JobCommunicators(const JobSession& job, const torch::Device& device, double timeout_seconds,
                                   const std::string& rendezvous, bool verbose) {
  const RendezvousMethod method = RendezvousMethod::parse(rendezvous);
  const WorldInfo& world = job.world();
  if (!method.folder.empty() && !job.launch().uses_store()) {
    throw std::invalid_argument("--rendezvous " + rendezvous + " is for jobs started without MPI (torchrun, srun, " +
                                "RANK/WORLD_SIZE variables); " +
                                (world.uses_mpi ? "this one was started by an MPI launcher" : "this is a single process"));
  }
  const auto on_failure = [&job](const std::string& message) { job.fail_job(message, 1); };
  if (trains_alone_on_device(world.world_size, device)) {
    host_ = std::make_unique<LocalCommunicator>();
    return;
  }
  if (world.uses_mpi) {
    // Started by an MPI launcher, even one rank gets the real backends (mpirun -np 1 on one GPU runs the
    // NCCL path of a larger job: the MPI bootstrap, the communicator, bucket hooks, the watchdog).
    host_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, job.thread_serialized(), timeout_seconds, on_failure);
  } else if (job.launch().uses_store()) {
    // Likewise a torchrun job of one rank: the store, Gloo and (on a GPU) NCCL.
    const auto timeout = timeout_of(timeout_seconds);
    const QuietLibTorchLogs quiet(verbose);
    rendezvous_ = std::make_unique<StoreRendezvous>(job.launch(), method, timeout);
    rendezvous_note_ = rendezvous_->where() + strprintf(", %d rank(s) joined in %.2f s", world.world_size,
                                                        rendezvous_->join_seconds());
    host_ = make_gloo_communicator(rendezvous_->store(), world.rank, world.world_size, timeout);
  } else {
    host_ = std::make_unique<LocalCommunicator>();
    return;
  }
  if (device.is_cuda()) device_ = make_nccl_communicator(*host_, device.index(), timeout_seconds, on_failure);
}

JobCommunicators::~JobCommunicators() = default;

namespace {

// The entries ("name=value" lines) of a configuration text, by name.
std::map<std::string, std::string> config_entries(const std::string& text) {
  std::map<std::string, std::string> entries;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.find('=');
    entries[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
  }
  return entries;
}

// The first entry in which this rank's text and rank 0's differ, as a phrase for the refusal.
std::string first_difference(const std::string& mine, const std::string& rank0) {
  const auto a = config_entries(mine), b = config_entries(rank0);
  const auto shown = [](const std::map<std::string, std::string>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? std::string("not set") : "'" + it->second + "'";
  };
  const auto name = [](const std::string& key) { return key == "build" ? key : "--" + key; };
  for (const auto& [key, value] : a) {
    if (!b.count(key) || b.at(key) != value) {
      return name(key) + " is " + shown(a, key) + " on this rank, " + shown(b, key) + " on rank 0";
    }
  }
  for (const auto& [key, value] : b) {
    if (!a.count(key)) return name(key) + " is not set on this rank, '" + value + "' on rank 0";
  }
  return "this rank's options equal rank 0's; another rank's differ";
}

}  // namespace

void require_same_config_on_all_ranks(Communicator& comm, const std::string& config_text) {
  if (comm.world_size() == 1) return;
  // FNV-1a: a stable hash (std::hash may differ between builds, and ranks may run different builds).
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : config_text) hash = (hash ^ c) * 1099511628211ULL;
  auto mine = torch::tensor({static_cast<int64_t>(hash)}, torch::kLong);
  auto rank0 = mine.clone();
  comm.broadcast(rank0, 0);
  auto differs = torch::tensor({static_cast<int64_t>(!torch::equal(mine, rank0))}, torch::kLong);
  comm.all_reduce(differs, ReduceOp::Max);
  if (differs.item<int64_t>() == 0) return;
  // Rank 0's text comes to every rank (a few KiB, once, on the way out) so that each names what differs.
  auto length = torch::tensor({static_cast<int64_t>(config_text.size())}, torch::kLong);
  comm.broadcast(length, 0);
  auto bytes = torch::zeros({length.item<int64_t>()}, torch::kLong);
  int64_t* byte = bytes.data_ptr<int64_t>();
  if (comm.rank() == 0) std::copy(config_text.begin(), config_text.end(), byte);
  comm.broadcast(bytes, 0);
  const std::string rank0_text(byte, byte + bytes.numel());
  throw std::invalid_argument("the ranks were started with different configurations (" +
                              first_difference(config_text, rank0_text) + "); every rank must run the same command");
}

}  // namespace mygpt
