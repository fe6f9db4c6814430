#pragma once
// train --time-budget: a run that trains for a wall-clock budget. Its clock is rank 0's: each step, the
// seconds it has spent are broadcast, so that every rank sets the same learning rate (the schedule runs by the
// share of the budget spent, trainer/lr_schedule.h) and every rank stops at the same step. The seconds spent
// are kept in checkpoints, so a resumed run continues with what is left.
#include <torch/torch.h>

#include <functional>
#include <optional>

#include "distributed/communicator.h"
#include "trainer/stateful.h"

namespace mygpt {

class TimeBudget final : public StatefulPart {
 public:
  using Clock = std::function<double()>;  // seconds on a clock that never goes back
  // comm must outlive this; its rank 0's clock decides.
  TimeBudget(double budget_seconds, Communicator& comm, torch::Device device, Clock clock);

  // The run's clock starts: what came before (building, loading data) is not counted, what the run a
  // checkpoint continues spent is (restored before this).
  void start();
  // The seconds the run has spent by rank 0's clock, the same on every rank to the microsecond: a collective
  // when ranks communicate, so every rank calls it at the same point of the run.
  double agreed_spent();
  double budget_seconds() const { return budget_; }
  // What the run a checkpoint continues had spent (0 for a fresh run).
  double spent_before() const { return spent_before_; }

  // The seconds spent (this rank's clock; rank 0's is the one written), in whole microseconds.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return false; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::load; }

 private:
  double spent_here() const;

  double budget_;
  Communicator& comm_;
  torch::Device device_;
  Clock clock_;
  double spent_before_ = 0;
  std::optional<double> started_at_;  // the clock's reading at start()
};

// The clock a run's budget reads: the steady clock, unless MYGPT_TEST_BUDGET_CLOCK (a test's) gives this rank
// a clock of its own: "S0,S1,..." makes rank r's clock advance S_r seconds at each reading (the last value for
// ranks beyond the list), so that a test knows where a run stops and can give the ranks clocks that disagree.
// A bad value is std::invalid_argument naming the variable.
TimeBudget::Clock time_budget_clock(int rank);

}  // namespace mygpt
