// The collective watchdog's rules, through the interface it uses to reach the device (fake events and a
// fake communicator here; CUDA events and NCCL in a real job): it selects the device in its own thread
// before any query, times a collective from the moment it could start, and fails on device errors.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collective_watchdog.h"
#include "distributed/deadline_poll.h"
#include "distributed/job_session.h"

namespace mygpt::collective_watchdog_test {
namespace {

using namespace std::chrono_literals;

// Records which thread bound the device and whether anything was asked of the device before that.
class FakeDevice final : public WatchedDevice {
 public:
  void bind_thread() override {
    ++binds;
    bound_thread = std::this_thread::get_id();
  }
  std::string async_error() override {
    note_query();
    std::lock_guard<std::mutex> lock(mutex);
    return error;
  }
  void abort() override { aborted = true; }
  void note_query() {
    ++queries;
    if (binds == 0 || std::this_thread::get_id() != bound_thread) query_outside_bound_thread = true;
  }
  void set_error(std::string e) {
    std::lock_guard<std::mutex> lock(mutex);
    error = std::move(e);
  }

  std::atomic<int> binds{0};
  std::atomic<int> queries{0};
  std::thread::id bound_thread;
  std::atomic<bool> query_outside_bound_thread{false};
  std::atomic<bool> aborted{false};
  std::mutex mutex;
  std::string error;
};

class FakeEvent final : public DeviceEvent {
 public:
  explicit FakeEvent(FakeDevice& device, bool passed = false) : device_(device), passed(passed) {}
  bool reached() override {
    device_.note_query();
    if (broken) throw std::runtime_error("an illegal memory access was encountered");
    return passed;
  }
  FakeDevice& device_;
  std::atomic<bool> passed;
  std::atomic<bool> broken{false};
};

// on_failure of a test: keeps the message and when it came.
struct Failures {
  void operator()(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(message);
    at = std::chrono::steady_clock::now();
    changed.notify_all();
  }
  bool wait_for_one(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, limit, [this] { return !messages.empty(); });
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages.size();
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> messages;
  std::chrono::steady_clock::time_point at;
};

std::function<void(const std::string&)> report_to(Failures& failures) {
  return [&failures](const std::string& m) { failures(m); };
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return condition();
}

TEST(CollectiveWatchdog, SelectsTheDeviceInItsOwnThreadBeforeAnyQuery) {
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 10, report_to(failures));
  watchdog.watch(std::make_shared<FakeEvent>(device, true), std::make_shared<FakeEvent>(device, true), "all-reduce");
  ASSERT_TRUE(eventually([&] { return watchdog.pending() == 0; }));
  EXPECT_EQ(device.binds.load(), 1);
  EXPECT_NE(device.bound_thread, std::this_thread::get_id());  // the watchdog's thread, not the caller's
  EXPECT_FALSE(device.query_outside_bound_thread);
  EXPECT_EQ(failures.count(), 0u);
}

TEST(CollectiveWatchdog, ACollectiveNotYetReadyIsNotTimed) {
  // A rank busy elsewhere (writing a checkpoint) has not reached the collective: its peers' waiting is
  // not its own timeout, and neither is its own lateness.
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 0.3, report_to(failures));
  auto ready = std::make_shared<FakeEvent>(device), done = std::make_shared<FakeEvent>(device);
  watchdog.watch(ready, done, "gradient bucket all-reduce");
  EXPECT_FALSE(failures.wait_for_one(900ms)) << "timed out before the collective could start";
  const auto ready_at = std::chrono::steady_clock::now();
  ready->passed = true;
  ASSERT_TRUE(failures.wait_for_one(5000ms));
  EXPECT_GE(failures.at - ready_at, 300ms);
  EXPECT_NE(failures.messages[0].find("gradient bucket all-reduce did not finish within --comm-timeout"),
            std::string::npos)
      << failures.messages[0];
  EXPECT_TRUE(device.aborted);
  EXPECT_TRUE(watchdog.failed());
}

TEST(CollectiveWatchdog, TheNextCollectiveIsTimedFromItsPredecessorsEnd) {
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 0.6, report_to(failures));
  auto first_done = std::make_shared<FakeEvent>(device), second_done = std::make_shared<FakeEvent>(device);
  watchdog.watch(std::make_shared<FakeEvent>(device, true), first_done, "all-reduce");
  watchdog.watch(std::make_shared<FakeEvent>(device, true), second_done, "broadcast");  // ready, queued behind
  std::this_thread::sleep_for(450ms);
  first_done->passed = true;
  const auto first_end = std::chrono::steady_clock::now();
  // Both were ready 0.45 s ago; timed from enqueue or from its own ready point, the second would fail
  // 0.15 s from now. It may take the whole 0.6 s from the first one's end.
  EXPECT_FALSE(failures.wait_for_one(450ms));
  EXPECT_EQ(watchdog.pending(), 1u);
  ASSERT_TRUE(failures.wait_for_one(5000ms));
  EXPECT_GE(failures.at - first_end, 600ms);
  EXPECT_NE(failures.messages[0].find("NCCL broadcast did not finish"), std::string::npos) << failures.messages[0];
}

// A CUDA graph capture holds a pause: no query may reach the device meanwhile, and the capture's time
// (here longer than the timeout) is not the collective's.
TEST(CollectiveWatchdog, APauseStopsEveryDeviceCallAndItsTimeIsNotCounted) {
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 0.3, report_to(failures));
  auto done = std::make_shared<FakeEvent>(device);
  watchdog.watch(std::make_shared<FakeEvent>(device, true), done, "all-reduce");
  ASSERT_TRUE(eventually([&] { return device.queries > 2; }));  // its clock runs
  int paused_at = 0;
  {
    const CollectiveWatchdog::Pause pause = watchdog.pause();
    paused_at = device.queries;
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(device.queries.load(), paused_at) << "the device was queried during a pause";
  }
  EXPECT_FALSE(failures.wait_for_one(100ms)) << "the paused time was counted toward the timeout";
  EXPECT_GT(device.queries.load(), paused_at) << "the watchdog did not resume";
  done->passed = true;
  ASSERT_TRUE(eventually([&] { return watchdog.pending() == 0; }));
  EXPECT_EQ(failures.count(), 0u);
}

// NCCL's non-blocking initialization is polled with --comm-timeout as its deadline (deadline_poll.h).
TEST(DeadlinePoll, ReturnsOnceDoneAndRefusesToWaitPastTheTimeout) {
  int polls = 0;
  poll_until_done([&] { return ++polls == 3; }, 5, "NCCL initialization");
  EXPECT_EQ(polls, 3);
  const auto start = std::chrono::steady_clock::now();
  try {
    poll_until_done([] { return false; }, 0.2, "NCCL initialization");
    ADD_FAILURE() << "an initialization that never ends was waited past its deadline";
  } catch (const std::runtime_error& e) {
    EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
    EXPECT_EQ(std::string(e.what()).rfind("NCCL initialization did not complete within --comm-timeout 0.2 s", 0), 0u)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
  }
  // An error passes through at once; timeout 0 waits as long as it takes.
  EXPECT_THROW(poll_until_done([]() -> bool { throw std::runtime_error("unhandled system error"); }, 0, "init"),
               std::runtime_error);
  const auto later = std::chrono::steady_clock::now() + 300ms;
  poll_until_done([&] { return std::chrono::steady_clock::now() > later; }, 0, "init");
}

// Closing a non-blocking communicator (NCCL: ncclCommFinalize, polled, then ncclCommDestroy) at a rank's
// exit: a peer that is gone must not hang it. These fakes stand for NCCL's answers.
struct FakeClosing {
  int finalize_calls = 0, polls = 0, destroyed = 0, aborted = 0;
  int polls_until_done = 0;  // < 0: never done
  bool finalize_fails = false;
  std::vector<std::string> said;
  CommunicatorClosing steps() {
    return {[this] {
              ++finalize_calls;
              if (finalize_fails) throw std::runtime_error("ncclCommFinalize failed: remote process exited");
              return polls_until_done == 0;
            },
            [this] { return ++polls == polls_until_done; }, [this] { ++destroyed; }, [this] { ++aborted; }};
  }
  std::function<void(const std::string&)> say() {
    return [this](const std::string& line) { said.push_back(line); };
  }
};

TEST(CommunicatorClose, AFinalizeInProgressIsPolledThenTheCommunicatorDestroyed) {
  FakeClosing at_once;
  close_within_deadline(at_once.steps(), 5, "closing", at_once.say());
  EXPECT_EQ(at_once.polls, 0);
  EXPECT_EQ(at_once.destroyed, 1);
  EXPECT_EQ(at_once.aborted, 0);
  EXPECT_TRUE(at_once.said.empty());
  FakeClosing later;
  later.polls_until_done = 3;
  close_within_deadline(later.steps(), 5, "closing", later.say());
  EXPECT_EQ(later.polls, 3);
  EXPECT_EQ(later.destroyed, 1);
  EXPECT_EQ(later.aborted, 0);
  EXPECT_TRUE(later.said.empty());
}

TEST(CommunicatorClose, AFinalizeThatOutlivesTheDeadlineIsAbortedWithOneLine) {
  FakeClosing never;
  never.polls_until_done = -1;
  const auto start = std::chrono::steady_clock::now();
  close_within_deadline(never.steps(), 0.2, "closing the NCCL communicator (ncclCommFinalize)", never.say());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(never.destroyed, 0) << "a destroy would wait for the peers that are gone";
  EXPECT_EQ(never.aborted, 1);
  ASSERT_EQ(never.said.size(), 1u);
  EXPECT_EQ(never.said[0].rfind("closing the NCCL communicator (ncclCommFinalize) did not complete within "
                                "--comm-timeout 0.2 s", 0),
            0u)
      << never.said[0];
  EXPECT_NE(never.said[0].find("aborting it instead"), std::string::npos) << never.said[0];
  EXPECT_EQ(never.said[0].find('\n'), std::string::npos) << "one line";
}

TEST(CommunicatorClose, AFailedFinalizeIsAbortedAndNamed) {
  FakeClosing failing;
  failing.finalize_fails = true;
  close_within_deadline(failing.steps(), 5, "closing", failing.say());
  EXPECT_EQ(failing.destroyed, 0);
  EXPECT_EQ(failing.aborted, 1);
  ASSERT_EQ(failing.said.size(), 1u);
  EXPECT_NE(failing.said[0].find("remote process exited"), std::string::npos) << failing.said[0];
}

TEST(CollectiveWatchdog, AFinishedCollectiveIsNeverTimedOut) {
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 0.05, report_to(failures));
  for (int i = 0; i < 20; ++i) {
    watchdog.watch(std::make_shared<FakeEvent>(device, true), std::make_shared<FakeEvent>(device, true), "all-reduce");
  }
  ASSERT_TRUE(eventually([&] { return watchdog.pending() == 0; }));
  EXPECT_FALSE(failures.wait_for_one(200ms));
}

TEST(CollectiveWatchdog, ZeroTimeoutWaitsForever) {
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 0, report_to(failures));
  watchdog.watch(std::make_shared<FakeEvent>(device, true), std::make_shared<FakeEvent>(device), "all-reduce");
  EXPECT_FALSE(failures.wait_for_one(300ms));
  EXPECT_EQ(watchdog.pending(), 1u);
}

TEST(CollectiveWatchdog, AnAsynchronousCommunicatorErrorEndsTheJobAtOnce) {
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 0, report_to(failures));
  watchdog.watch(std::make_shared<FakeEvent>(device, true), std::make_shared<FakeEvent>(device), "all-reduce");
  device.set_error("remote process exited or there was a network error");
  ASSERT_TRUE(failures.wait_for_one(5000ms));
  EXPECT_EQ(failures.messages[0], "NCCL error during all-reduce: remote process exited or there was a network error");
  EXPECT_TRUE(device.aborted);
}

TEST(CollectiveWatchdog, ADeviceErrorInTheStreamEndsTheJob) {
  FakeDevice device;
  Failures failures;
  CollectiveWatchdog watchdog(device, 0, report_to(failures));
  auto done = std::make_shared<FakeEvent>(device);
  done->broken = true;
  watchdog.watch(std::make_shared<FakeEvent>(device, true), done, "broadcast");
  ASSERT_TRUE(failures.wait_for_one(5000ms));
  EXPECT_NE(failures.messages[0].find("illegal memory access"), std::string::npos) << failures.messages[0];
  EXPECT_EQ(failures.count(), 1u);  // the thread stops after the first failure
}

TEST(CollectiveWatchdog, OnlyTheInitializingThreadOrThreadMultipleMayCallMpi) {
  EXPECT_TRUE(may_call_mpi_from(MPI_THREAD_SERIALIZED, /*on_initializing_thread=*/true));
  EXPECT_TRUE(may_call_mpi_from(MPI_THREAD_SINGLE, true));
  EXPECT_FALSE(may_call_mpi_from(MPI_THREAD_SERIALIZED, false));
  EXPECT_FALSE(may_call_mpi_from(MPI_THREAD_FUNNELED, false));
  EXPECT_TRUE(may_call_mpi_from(MPI_THREAD_MULTIPLE, false));
}

}  // namespace
}  // namespace mygpt::collective_watchdog_test
