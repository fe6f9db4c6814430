#pragma once
// What the ranks of an evaluation do together, round by round: every rank takes part in every round (each
// round may hold collectives: --zero 3 gathers each unit's parameters inside every forward), a rank with
// nothing left to score in a round too.
#include <functional>

namespace mygpt {

struct EvaluationRounds {
  // Asked between rounds by every rank alike (a collective); true ends the pass early.
  std::function<bool()> stop;
  // Called on a rank that has no batch in a round (the last rounds, when the world size does not divide the
  // items): --zero 3's idle forward, the gathers the other ranks' forwards wait for. Its result is not scored.
  std::function<void()> sit_out;
};

}  // namespace mygpt
