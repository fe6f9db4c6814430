#include "distributed/failure_notice.h"

#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <thread>

#include "distributed/bounded_call.h"
#include "distributed/store_rendezvous.h"

namespace mygpt {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// This job's keys in the store at job.master_addr:master_port, served here when `serve`; nothing when it
// cannot be opened by `deadline`.
c10::intrusive_ptr<c10d::Store> open_store(const LaunchEnvironment& job, bool serve, Clock::time_point deadline) {
  // The process is ending: c10d's warnings of each failed connection attempt (with stack traces) would
  // only bury its one line.
  FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 3);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(job.master_port);
  options.isServer = serve;
  options.numWorkers = static_cast<size_t>(job.world_size);
  options.waitWorkers = false;
  options.timeout = left_until(deadline);
  const std::string host = job.master_addr;
  auto base = call_within<c10::intrusive_ptr<c10d::Store>>(
      left_until(deadline + std::chrono::seconds(1)),
      [host, options]() -> c10::intrusive_ptr<c10d::Store> { return c10::make_intrusive<c10d::TCPStore>(host, options); },
      [] { return std::string("no answer"); });
  return c10::make_intrusive<c10d::PrefixStore>(store_key_prefix(job), base);
}

// One request, given up at `deadline` (c10d reads most answers with no timeout).
template <class T>
T ask(const c10::intrusive_ptr<c10d::Store>& store, std::function<T(c10d::Store&)> request, Clock::time_point deadline) {
  return call_within<T>(
      left_until(deadline), [store, request = std::move(request)] { return request(*store); },
      [] { return std::string("no answer"); });
}

bool reachable(const LaunchEnvironment& job) {
  return job.uses_store() && job.world_size > 1 && !job.master_addr.empty() && job.master_port != 0;
}

}  // namespace

void tell_peers_of_refusal(const LaunchEnvironment& job, const std::string& why, std::chrono::milliseconds patience) {
  if (!reachable(job)) return;
  const auto deadline = Clock::now() + patience;
  const bool serve = job.rank == 0 && !job.agent_store;
  const std::string line = (job.rank >= 0 ? "rank " + std::to_string(job.rank) : std::string("a rank")) +
                           " was refused: " + why;
  try {
    const auto store = open_store(job, serve, deadline);
    ask<bool>(store, [line](c10d::Store& s) { s.set("failed", bytes(line)); return true; }, deadline);
    // Counted apart from "failed_read", which counts the ranks that joined and read the line.
    ask<int64_t>(store, [](c10d::Store& s) { return s.add("refused", 1); }, deadline);
    if (!serve) return;
    // Serving the store, this process must outlive the others' reading of it: until every rank has
    // either read the line or been refused itself.
    const auto count = [&store, deadline](const std::string& key) {
      return ask<int64_t>(store, [key](c10d::Store& s) { return s.add(key, 0); }, deadline);
    };
    while (count("failed_read") + count("refused") < job.world_size && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
    // No store within patience (rank 0 gone too, the port taken): the others' own timeout ends them.
  }
}

void leave_failure_line(const LaunchEnvironment& job, const std::string& line, std::chrono::milliseconds patience) {
  if (!reachable(job)) return;
  const auto deadline = Clock::now() + patience;
  try {
    const auto store = open_store(job, /*serve=*/false, deadline);
    ask<bool>(store, [line](c10d::Store& s) { s.set("failed", bytes(line)); return true; }, deadline);
  } catch (const std::exception&) {
    // Not a store (another program's port), or silent: nothing more to do.
  }
}

}  // namespace mygpt
