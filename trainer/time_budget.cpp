#include "trainer/time_budget.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mygpt {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TimeBudget::TimeBudget(double budget_seconds, Communicator& comm, torch::Device device, Clock clock)
    : budget_(budget_seconds), comm_(comm), device_(device), clock_(std::move(clock)) {
  if (!clock_) clock_ = steady_seconds;
}

void TimeBudget::start() { started_at_ = clock_(); }

double TimeBudget::spent_here() const {
  return started_at_ ? spent_before_ + (clock_() - *started_at_) : spent_before_;
}

double TimeBudget::agreed_spent() {
  const double here = spent_here();
  if (!comm_.communicates()) return here;
  // Microseconds as an integer: rank 0's value arrives unchanged on every backend (NCCL, MPI, Gloo, MPS).
  auto micros = torch::full({1}, std::llround(here * 1e6), torch::TensorOptions().dtype(torch::kLong).device(device_));
  comm_.broadcast(micros, 0);
  return static_cast<double>(micros.item<int64_t>()) / 1e6;
}

StateDict TimeBudget::state_dict() const {
  return {{"spent_us", torch::tensor(static_cast<int64_t>(std::llround(spent_here() * 1e6)), torch::kLong)}};
}

void TimeBudget::load_state_dict(const StateDict& state) {
  const auto entry = state.find("spent_us");
  if (entry == state.end() || entry->second.numel() != 1 || entry->second.scalar_type() != torch::kLong) {
    throw std::invalid_argument("its time budget's state has no single integer spent_us");
  }
  const int64_t micros = entry->second.item<int64_t>();
  if (micros < 0) throw std::invalid_argument("its time budget's spent_us is negative");
  spent_before_ = static_cast<double>(micros) / 1e6;
  started_at_.reset();
}

TimeBudget::Clock time_budget_clock(int rank) {
  const char* test = std::getenv("MYGPT_TEST_BUDGET_CLOCK");
  if (test == nullptr || *test == '\0') return steady_seconds;
  std::vector<double> ticks;
  std::stringstream list(test);
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const double tick = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(tick >= 0) || !std::isfinite(tick)) {
      throw std::invalid_argument(std::string("MYGPT_TEST_BUDGET_CLOCK='") + test +
                                  "': give seconds per reading for each rank, e.g. 1,5");
    }
    ticks.push_back(tick);
  }
  const double tick = ticks[std::min<size_t>(static_cast<size_t>(rank), ticks.size() - 1)];
  auto readings = std::make_shared<int64_t>(0);
  return [tick, readings] { return tick * static_cast<double>((*readings)++); };
}

}  // namespace mygpt
