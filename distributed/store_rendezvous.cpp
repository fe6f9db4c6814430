#include "distributed/store_rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "common/file_io.h"
#include "common/file_time.h"
#include "common/folder_claim.h"
#include "common/strprintf.h"

namespace mygpt {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string this_process() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(::getpid());
}

std::string seconds_text(std::chrono::milliseconds d) { return strprintf("%.0f s", d.count() / 1000.0); }

void require_resolvable(const std::string& host, const std::string& source) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    throw std::invalid_argument("rank 0's host '" + host + "' (from " + source + ") does not resolve: " + gai_strerror(rc));
  }
  ::freeaddrinfo(found);
}

// The modification time of a file, in the file system's own clock.
std::optional<timespec> mtime_of(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return modification_time(st);
}
bool not_older(const timespec& a, const timespec& b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec >= b.tv_nsec);
}

// The file server's "now": the mtime of a file written there now.
timespec folder_now(const fs::path& folder, const std::string& what) {
  const fs::path probe = folder / (".probe." + this_process());
  {
    std::ofstream out(probe);
    out << "probe\n";
    if (!out.flush()) throw std::invalid_argument(what + ": cannot write in " + folder.string());
  }
  const auto t = mtime_of(probe.string());
  std::error_code ec;
  fs::remove(probe, ec);
  if (!t) throw std::invalid_argument(what + ": cannot write in " + folder.string());
  return *t;
}

std::string random_name() {
  std::random_device random;
  return strprintf("%08x%08x", random(), random());
}

}  // namespace

RendezvousMethod RendezvousMethod::parse(const std::string& value) {
  if (value == "tcp") return {};
  if (value.rfind("file:", 0) == 0 && value.size() > 5) return {value.substr(5)};
  throw std::invalid_argument("--rendezvous '" + value + "': expected tcp or file:DIR");
}

StoreRendezvous::StoreRendezvous(const LaunchEnvironment& launch, const RendezvousMethod& method,
                                 std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  if (method.folder.empty()) {
    open_tcp(launch, timeout);
  } else {
    open_file(launch, method.folder, timeout);
  }
  // Each torchrun attempt starts with keys of its own: an agent's store outlives the workers it restarts.
  store_ = c10::make_intrusive<c10d::PrefixStore>("mygpt/attempt_" + std::to_string(launch.restart_count), base_);
  join(launch, timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
  join_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
}

StoreRendezvous::~StoreRendezvous() {
  store_.reset();
  base_.reset();
  if (!claim_) return;
  std::error_code ec;
  // The name may have been replaced by a later job that took over a claim it thought dead: leave it.
  std::ifstream in(pointer_file_);
  std::string name;
  if (std::getline(in, name) && name == published_) fs::remove(pointer_file_, ec);
  // The store file is c10d's to remove: the last of its users deletes it (a dead job's is removed by the
  // next rank 0 that claims the folder).
}

void StoreRendezvous::open_tcp(const LaunchEnvironment& launch, std::chrono::milliseconds timeout) {
  const std::string hint = " (set it to rank 0's host, or use --rendezvous file:DIR)";
  if (launch.master_addr.empty()) throw std::invalid_argument("MASTER_ADDR is not set" + hint);
  if (launch.master_port == 0) throw std::invalid_argument("MASTER_PORT is not set (a free TCP port on rank 0's host)");
  require_resolvable(launch.master_addr, launch.master_source);
  where_ = "tcp://" + launch.master_addr + ":" + std::to_string(launch.master_port);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(launch.master_port);
  options.isServer = launch.rank == 0 && !launch.agent_store;
  options.numWorkers = static_cast<size_t>(launch.world_size);
  options.waitWorkers = false;  // join() counts the ranks and says which are missing
  options.timeout = timeout;
  try {
    base_ = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, options);
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (options.isServer && (message.find("EADDRINUSE") != std::string::npos ||
                             message.find("ddress already in use") != std::string::npos)) {
      throw std::invalid_argument("MASTER_PORT=" + std::to_string(launch.master_port) +
                                  ": the port is already in use on this host (choose another; from " +
                                  launch.master_source + ")");
    }
    if (options.isServer) {
      throw std::runtime_error("rank 0 could not serve the rendezvous at " + where_ + " (from " + launch.master_source +
                               "): " + message);
    }
    throw std::runtime_error("rank " + std::to_string(launch.rank) + " could not reach the rendezvous at " + where_ +
                             " within " + seconds_text(timeout) + " (from " + launch.master_source + "; " +
                             (launch.agent_store ? "torchrun's agent serves it" : "rank 0 serves it") +
                             "): " + message);
  }
}

void StoreRendezvous::open_file(const LaunchEnvironment& launch, const std::string& folder,
                                std::chrono::milliseconds timeout) {
  const std::string what = "--rendezvous file:" + folder;
  where_ = "file:" + folder;
  const fs::path dir = fs::path(folder) / "mygpt-rendezvous";
  create_output_directory(dir, what);
  pointer_file_ = (dir / "current").string();
  if (launch.rank == 0) {
    // A live earlier job's claim is refused (one line naming its holder); a dead one's is taken over.
    claim_ = std::make_unique<FolderClaim>(dir, what);
    for (const auto& entry : fs::directory_iterator(dir)) {  // store files of dead jobs
      if (entry.path().extension() == ".store") fs::remove(entry.path());
    }
    published_ = random_name();
    store_file_ = (dir / (published_ + ".store")).string();
    base_ = c10::make_intrusive<c10d::FileStore>(store_file_, launch.world_size);
    write_file_atomically(pointer_file_, published_ + "\n");
    return;
  }
  // Only a name published (or refreshed) after this rank started is this job's.
  const timespec started = folder_now(dir, what);
  const auto deadline = Clock::now() + timeout;
  for (auto pause = std::chrono::milliseconds(10);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
    const auto stamped = mtime_of(pointer_file_);
    if (stamped && not_older(*stamped, started)) {
      std::ifstream in(pointer_file_);
      std::string name;
      if (std::getline(in, name) && !name.empty()) {
        store_file_ = (dir / (name + ".store")).string();
        base_ = c10::make_intrusive<c10d::FileStore>(store_file_, launch.world_size);
        return;
      }
    }
    if (Clock::now() > deadline) {
      throw std::runtime_error("rank " + std::to_string(launch.rank) + ": no rank 0 opened the rendezvous in " + folder +
                               " within " + seconds_text(timeout) +
                               " (is rank 0 running, with the same --rendezvous?)");
    }
    std::this_thread::sleep_for(pause);
  }
}

void StoreRendezvous::join(const LaunchEnvironment& launch, std::chrono::milliseconds timeout) {
  const int world = launch.world_size;
  const std::string me = this_process();
  const std::string rank_var = launch.launcher == Launcher::slurm ? "SLURM_PROCID" : "RANK";
  const std::string world_var = launch.launcher == Launcher::slurm ? "SLURM_STEP_NUM_TASKS" : "WORLD_SIZE";
  // Rank 0 serves a TCP rendezvous itself (unless torchrun's agent does): its exit closes the store.
  const bool serves_store = launch.rank == 0 && !launch.agent_store && claim_ == nullptr;
  const std::string claimed = text(store_->compareSet("rank/" + std::to_string(launch.rank), {}, bytes(me)));
  if (claimed != me) {
    refuse(rank_var + "=" + std::to_string(launch.rank) + " was already taken by " + claimed + " in the rendezvous at " +
               where_ + ": every rank needs its own " + rank_var,
           serves_store, timeout);
  }
  // The first rank to join sets the job's size; the line names both ranks, whichever of them finds it.
  const std::string mine = std::to_string(world) + "@" + std::to_string(launch.rank);
  const std::string first = text(store_->compareSet("world_size", {}, bytes(mine)));
  const auto at = first.find('@');
  const std::string first_world = first.substr(0, at);
  if (first_world != std::to_string(world)) {
    const int first_rank = std::stoi(first.substr(at + 1));
    auto on = [](const std::string& size, int rank) { return size + " on rank " + std::to_string(rank); };
    const bool mine_first = launch.rank < first_rank;
    refuse(world_var + " differs between the ranks of the rendezvous at " + where_ + ": " +
               (mine_first ? on(std::to_string(world), launch.rank) : on(first_world, first_rank)) + ", " +
               (mine_first ? on(first_world, first_rank) : on(std::to_string(world), launch.rank)) +
               " (start every rank with the same " + world_var + ")",
           serves_store, timeout);
  }
  const int64_t joined = store_->add("joined", 1);
  if (joined == world) store_->set("complete", bytes("1"));
  const auto deadline = Clock::now() + timeout;
  for (auto pause = std::chrono::milliseconds(5);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
    if (store_->check({"complete"})) break;
    if (store_->check({"failed"})) {
      // Another rank found the job misconfigured: stop with its line (and tell it this rank has read it).
      const std::string why = text(store_->get("failed"));
      store_->add("failed_read", 1);
      throw std::invalid_argument(why);
    }
    if (Clock::now() > deadline) {
      const int64_t count = store_->add("joined", 0);
      std::string missing;
      int listed = 0;
      for (int r = 0; r < world && listed < 8; ++r) {
        if (!store_->check({"rank/" + std::to_string(r)})) {
          missing += (listed++ ? ", " : "") + std::to_string(r);
        }
      }
      throw std::runtime_error(std::to_string(count) + " of " + std::to_string(world) + " ranks joined the rendezvous at " + where_ +
                               " in " + seconds_text(timeout) + " (missing: rank " + missing +
                               (count + listed < world ? ", ..." : "") + ")");
    }
    // Keeps the published name fresh for ranks that start later (see the header).
    if (claim_) ::utimensat(AT_FDCWD, pointer_file_.c_str(), nullptr, 0);
    std::this_thread::sleep_for(pause);
  }
}

void StoreRendezvous::refuse(const std::string& why, bool serves_store, std::chrono::milliseconds timeout) {
  try {
    // The ranks already waiting in join() read it and stop with the same line instead of waiting out
    // the timeout. A rank that serves the store waits (a few seconds at most) until they have read it:
    // its exit closes the store, and a rank that then polls it would only see a broken connection.
    store_->set("failed", bytes(why));
    if (serves_store) {
      const auto deadline = Clock::now() + std::min(timeout, std::chrono::milliseconds(5000));
      while (store_->add("failed_read", 0) < store_->add("joined", 0) && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  } catch (const std::exception&) {
    // The store itself failing changes nothing: this rank's own line below is what it reports.
  }
  throw std::invalid_argument(why);
}

}  // namespace mygpt
