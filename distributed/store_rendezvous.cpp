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
#include "distributed/bounded_call.h"
#include "distributed/failure_notice.h"

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

std::string seconds_text(std::chrono::milliseconds d) { return strprintf("%g s", d.count() / 1000.0); }

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  // At least a millisecond: zero would mean "no limit" to run_within.
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

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

std::string store_key_prefix(const LaunchEnvironment& launch) {
  return "mygpt/" + (launch.job_id.empty() ? std::string() : "job_" + launch.job_id + "/") + "attempt_" +
         std::to_string(launch.restart_count);
}

RendezvousMethod RendezvousMethod::parse(const std::string& value) {
  if (value == "tcp") return {};
  if (value.rfind("file:", 0) == 0 && value.size() > 5) return {value.substr(5)};
  throw std::invalid_argument("--rendezvous '" + value + "': expected tcp or file:DIR");
}

StoreRendezvous::StoreRendezvous(const LaunchEnvironment& launch, const RendezvousMethod& method,
                                 std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  // One deadline for the whole rendezvous: every wait in it (connect, ping, each store request, the
  // file rendezvous's polling) ends by it. --comm-timeout 0 (no limit) arrives as thirty days.
  timeout_ = timeout;
  deadline_ = start + timeout;
  source_ = launch.master_source;
  if (method.folder.empty()) {
    open_tcp(launch, timeout);
  } else {
    open_file(launch, method.folder, timeout);
  }
  // Each torchrun attempt starts with keys of its own: an agent's store outlives the workers it restarts.
  store_ = c10::make_intrusive<c10d::PrefixStore>(store_key_prefix(launch), base_);
  join(launch);
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
  // c10d's own connect retries end a little before our backstop below (which is for the ping, where c10d
  // has no timeout): where nothing listens, c10d's error, and with --verbose its retry warnings, are what
  // the rank reports, instead of a race between the two deadlines (seen lost under load).
  const auto left = left_until(deadline_);
  options.timeout = left - std::min<std::chrono::milliseconds>(std::chrono::seconds(1), left / 3);
  try {
    // c10d connects, then sends its ping and reads the answer with no timeout of its own: a listener that
    // accepts and never answers would hold this rank forever.
    const std::string host = launch.master_addr;
    base_ = call_within<c10::intrusive_ptr<c10d::Store>>(
        left_until(deadline_),
        [host, options]() -> c10::intrusive_ptr<c10d::Store> { return c10::make_intrusive<c10d::TCPStore>(host, options); },
        [&] {
          return late_line(options.isServer ? "answer to c10d's ping (this rank serves the store itself)"
                                            : "answer to c10d's connect and ping (is rank 0 running, and is nothing "
                                              "else listening on MASTER_PORT?)");
        });
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (options.isServer && (message.find("EADDRINUSE") != std::string::npos ||
                             message.find("ddress already in use") != std::string::npos)) {
      const std::string port = std::to_string(launch.master_port);
      const std::string line =
          launch.derived_port
              ? "port " + port + " in use, perhaps by another job; set MASTER_PORT (a free port on " +
                    launch.master_addr + "; this one was derived from SLURM_JOB_ID and SLURM_STEP_ID)"
              : "MASTER_PORT=" + port + ": the port is already in use on this host, perhaps by another job " +
                    "(choose another; from " + launch.master_source + ")";
      // The other ranks may already be connected to whatever holds the port (another job's store, on a
      // port derived from its own job and step): they wait under this job's keys, and read this there.
      leave_failure_line(launch, line, std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(5)));
      throw std::invalid_argument(line);
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
  // DIR is a folder every rank sees, made by the user: creating a whole missing path would hide a typo
  // (each host would then meet in a private folder of its own and wait out the timeout).
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw std::invalid_argument(what + ": " + (fs::exists(folder, ec) ? "not a directory" : "no such directory") +
                                " (create it on a file system every rank sees)");
  }
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
  const auto deadline = deadline_;
  for (auto pause = std::chrono::milliseconds(10);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
    const auto stamped = mtime_of(pointer_file_);
    if (stamped && not_older(*stamped, started)) {
      std::ifstream in(pointer_file_);
      std::string name;
      if (std::getline(in, name) && !name.empty()) {
        store_file_ = (dir / (name + ".store")).string();
        const std::string file = store_file_;
        const int world = launch.world_size;
        base_ = call_within<c10::intrusive_ptr<c10d::Store>>(
            left_until(deadline),
            [file, world]() -> c10::intrusive_ptr<c10d::Store> { return c10::make_intrusive<c10d::FileStore>(file, world); },
            [&] { return late_line("answer while opening the store file " + file); });
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

std::string StoreRendezvous::late_line(const std::string& awaited) const {
  // main() puts "rank N: " before the line of a job of several ranks.
  return "the rendezvous at " + where_ +
         (source_.empty() || where_.rfind("tcp:", 0) != 0 ? "" : " (from " + source_ + ")") + " sent no " + awaited +
         " within --comm-timeout " + seconds_text(timeout_);
}

template <class T>
T StoreRendezvous::ask(const std::string& awaited, std::function<T(c10d::Store&)> request,
                       Clock::time_point deadline) const {
  // The request owns the store (by value): a late one stays blocked on it after this rank has given up.
  c10::intrusive_ptr<c10d::Store> store = store_;
  return call_within<T>(
      left_until(deadline), [store, request = std::move(request)] { return request(*store); },
      [&] { return late_line(awaited); });
}

void StoreRendezvous::join(const LaunchEnvironment& launch) {
  const int world = launch.world_size;
  const std::string me = this_process();
  const std::string rank_var = launch.launcher == Launcher::slurm ? "SLURM_PROCID" : "RANK";
  const std::string world_var = launch.launcher == Launcher::slurm ? "SLURM_STEP_NUM_TASKS" : "WORLD_SIZE";
  // Rank 0 serves a TCP rendezvous itself (unless torchrun's agent does): its exit closes the store.
  const bool serves_store = launch.rank == 0 && !launch.agent_store && claim_ == nullptr;
  const std::string rank_key = "rank/" + std::to_string(launch.rank);
  const std::string claimed = text(ask<std::vector<uint8_t>>(
      "answer to this rank's claim of " + rank_key,
      [rank_key, me](c10d::Store& s) { return s.compareSet(rank_key, {}, bytes(me)); }, deadline_));
  // Counted before the size check: a rank 0 that serves the store and refuses the job waits until every
  // rank that came this far has read why (its exit closes the store under them).
  const auto arrived = [this] {
    return ask<int64_t>("answer to an update of 'arrived'", [](c10d::Store& s) { return s.add("arrived", 1); },
                        deadline_);
  };
  if (claimed == me) {
    arrived();
    arrived_ = true;
  }
  if (claimed != me) {
    refuse(rank_var + "=" + std::to_string(launch.rank) + " was already taken by " + claimed + " in the rendezvous at " +
               where_ + ": every rank needs its own " + rank_var,
           serves_store);
  }
  // The first rank to join sets the job's size; the line names both ranks, whichever of them finds it.
  const std::string mine = std::to_string(world) + "@" + std::to_string(launch.rank);
  const std::string first = text(ask<std::vector<uint8_t>>(
      "answer about the job's size",
      [mine](c10d::Store& s) { return s.compareSet("world_size", {}, bytes(mine)); }, deadline_));
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
           serves_store);
  }
  // The polling below ends at deadline_ with its own line (who joined, who is missing); its requests to a
  // store that has answered so far get a few seconds more, so that one in flight at the deadline does not
  // end the rank with a vaguer line first.
  const auto answer_by = deadline_ + std::chrono::seconds(5);
  const auto add = [this, answer_by](const std::string& key, int64_t by) {
    return ask<int64_t>("answer to an update of '" + key + "'", [key, by](c10d::Store& s) { return s.add(key, by); },
                        answer_by);
  };
  const auto has = [this, answer_by](const std::string& key) {
    return ask<bool>("answer to a check of '" + key + "'",
                     [key](c10d::Store& s) { return s.check({key}); }, answer_by);
  };
  const int64_t joined = add("joined", 1);
  if (joined == world) {
    ask<bool>("answer to this rank's 'complete'", [](c10d::Store& s) { s.set("complete", bytes("1")); return true; },
              answer_by);
  }
  for (auto pause = std::chrono::milliseconds(5);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
    if (has("complete")) break;
    if (has("failed")) {
      // Another rank found the job misconfigured: stop with its line (and tell it this rank has read it).
      const std::string why = text(ask<std::vector<uint8_t>>(
          "answer with the 'failed' line", [](c10d::Store& s) { return s.get("failed"); }, answer_by));
      add("failed_read", 1);
      if (serves_store) wait_until_every_rank_read();
      throw std::invalid_argument(why);
    }
    if (Clock::now() > deadline_) {
      // A few more seconds to count who came: the store did answer until now.
      const auto grace = Clock::now() + std::chrono::seconds(5);
      const int64_t count = ask<int64_t>("count of joined ranks", [](c10d::Store& s) { return s.add("joined", 0); }, grace);
      std::string missing;
      int listed = 0;
      for (int r = 0; r < world && listed < 8; ++r) {
        const std::string key = "rank/" + std::to_string(r);
        if (!ask<bool>("answer to a check of '" + key + "'", [key](c10d::Store& s) { return s.check({key}); }, grace)) {
          missing += (listed++ ? ", " : "") + std::to_string(r);
        }
      }
      throw std::runtime_error(std::to_string(count) + " of " + std::to_string(world) + " ranks joined the rendezvous at " + where_ +
                               " in " + seconds_text(timeout_) + " (missing: rank " + missing +
                               (count + listed < world ? ", ..." : "") + ")");
    }
    // Keeps the published name fresh for ranks that start later (see the header).
    if (claim_) ::utimensat(AT_FDCWD, pointer_file_.c_str(), nullptr, 0);
    std::this_thread::sleep_for(pause);
  }
}

void StoreRendezvous::refuse(const std::string& why, bool serves_store) {
  try {
    // The ranks already waiting in join() read it and stop with the same line instead of waiting out
    // the timeout. A rank that serves the store waits (a few seconds at most) until they have read it:
    // its exit closes the store, and a rank that then polls it would only see a broken connection.
    const auto deadline = Clock::now() + std::min(timeout_, std::chrono::milliseconds(5000));
    ask<bool>("answer", [why](c10d::Store& s) { s.set("failed", bytes(why)); return true; }, deadline);
    if (arrived_) ask<int64_t>("answer", [](c10d::Store& s) { return s.add("failed_read", 1); }, deadline);
    if (serves_store) wait_until_every_rank_read();
  } catch (const std::exception&) {
    // The store itself failing (or not answering) changes nothing: this rank's own line below is what it
    // reports.
  }
  throw std::invalid_argument(why);
}

void StoreRendezvous::wait_until_every_rank_read() const {
  // A few seconds at most: a rank that stopped after arriving must not hold this one.
  const auto deadline = Clock::now() + std::min(timeout_, std::chrono::milliseconds(5000));
  const auto count = [this, deadline](const std::string& key) {
    return ask<int64_t>("answer", [key](c10d::Store& s) { return s.add(key, 0); }, deadline);
  };
  try {
    while (count("failed_read") < count("arrived") && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
    // Late or broken: the caller's own line is what it reports.
  }
}

}  // namespace mygpt
