#pragma once
// A fault for tests of the skip path (tests/mpi/fp16_test.sh, and MYGPT_TEST_INJECT_OVERFLOW, which
// launcher/run_builder.cpp reads): this rank's gradients overflow at chosen steps as an fp16 backward's
// do, while the loss stays finite. It lives in a gradient hook on the model, so the training step has no
// line of it.
#include <cstdint>
#include <functional>

#include "model/gpt.h"

namespace mygpt {

// From now on, in the last micro-step of each step for which at_step(step) holds, the gradient of the
// model's token embedding (which every backward reaches) becomes NaN, as an overflowing backward leaves
// it: after the all-reduce every rank's gradient norm is NaN, and every rank skips that step. The hook
// counts backward passes: the k-th from now is micro-step k % grad_accum of step first_step + k /
// grad_accum, so the model must go through no backward but those of the Trainer's steps from first_step
// on (as a run from build_trainer does; evaluations and samples record no gradient).
void inject_overflows(Gpt& model, std::function<bool(int64_t step)> at_step, int64_t first_step, int64_t grad_accum);

}  // namespace mygpt
