#pragma once
// Every rank must hold the same parameters after every step, whatever is sharded. An asynchronous
// collective whose tensors (or handle) are freed before wait() gives a "torn" result that only some ranks
// see (nanochat #843), and the ranks then train apart without a word. --check-ranks-every N compares the
// ranks every N steps: each hashes its parameters' bytes (XXH64), the hashes are gathered, and on any
// difference the run stops with one line (rank 0's; distributed/rank_zero_reports.h) naming the step and
// which ranks hold which, exit 1.
//
// A fault for its tests: MYGPT_TEST_PERTURB_RANK=RANK:STEP moves one value of rank RANK's first parameter
// to the next float after step STEP (as the log counts steps), so that the ranks differ from there on.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace mygpt {

// XXH64 over the bytes of the tensors in order, each copied to the host in turn (one tensor's worth of
// host memory at a time): equal exactly when every value is the same bit for bit.
uint64_t tensors_checksum(const std::vector<torch::Tensor>& tensors);

// "ranks 0, 2 hold parameters of checksum 1f...; rank 1 holds 9c...": the ranks grouped by checksum,
// the largest group first.
std::string rank_checksums_text(const std::vector<uint64_t>& checksum_of_rank);

class RankConsistencyCheck {
 public:
  // every: --check-ranks-every (0: never; a job of one rank has nothing to compare either).
  RankConsistencyCheck(Communicator& comm, int64_t every);
  // After the step that the log calls `step`: compares the ranks when due (after steps every, 2*every, ...).
  // When they differ, rank 0 throws std::runtime_error and the others EndedByRankZero(1). With --zero 3 the
  // model's own parameters are this rank's shards: `whole` then gives the gathered parameters (a
  // collective, called on every rank when the check is due).
  void after_step(int64_t step, const torch::nn::Module& model,
                  const std::function<std::vector<torch::Tensor>()>& whole = nullptr);

 private:
  Communicator& comm_;
  int64_t every_;
  std::optional<int64_t> perturb_after_step_;  // the test fault on this rank
};

}  // namespace mygpt
