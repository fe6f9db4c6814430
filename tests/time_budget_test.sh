#!/usr/bin/env bash
# train --time-budget through the binary (trainer/time_budget.h). Behaviour, never speed: a run on the real
# clock stops by itself and ends with the line `val_bpb: X`; bad budgets are refused in one line (exit 2); with
# MYGPT_TEST_BUDGET_CLOCK (each reading of the clock advances a fixed number of seconds, read once before each
# step) where a run stops is known: alone, under mpirun -np 2 with ranks whose clocks disagree (rank 0's decides:
# both stop at its step, or the job would hang or fail), and resumed (the seconds spent before are counted).
# usage: time_budget_test.sh PATH/TO/mygpt-ddp
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

use_binary "${1:-}"
use_mpirun
make_work_dir time_budget
common=(train builtin:sort --preset tiny --seq-len 32 --batch-size 4 --eval-every 0 --eval-steps 2 --log-every 1
        --threads 1 --device cpu)
last_line() { tail -n 1 "$WORK/$1.out"; }
val_bpb_line='^val_bpb: [0-9]+\.[0-9]{6}$'

# The real clock: it stops, with one last validation and its bits per byte as the last line.
if expect_ok real "${common[@]}" --time-budget 2s --out "$WORK/real"; then
  check "a 2 s budget ends with the line 'val_bpb: X' ($(last_line real))" grep -qE "$val_bpb_line" <(last_line real)
  steps=$(sed -nE 's/^time budget spent: .* of 2s, after ([0-9]+) steps$/\1/p' "$WORK/real.out")
  check "... after saying where the budget ran out (after ${steps:-?} steps)" test -n "$steps"
  check "... with its last checkpoint at that step" test -e "$WORK/real/ckpt_$(printf %08d "${steps:-0}").safetensors"
  check "... and a validation at that step, though --eval-every 0" grep -qE "^step +${steps:-x} \| val loss: .* \| val bpb: " "$WORK/real.out"
fi

# Bad budgets: one line naming --time-budget, exit 2, nothing written.
expect_bad_input bad_unit "^mygpt-ddp: error: --time-budget: '5x' is not a duration: give seconds \(300\)" "$WORK/bad" \
  "${common[@]}" --time-budget 5x --out "$WORK/bad"
expect_bad_input bad_order "^mygpt-ddp: error: --time-budget: '1m1h' is not a duration" "$WORK/bad" \
  "${common[@]}" --time-budget=1m1h --out "$WORK/bad"
expect_bad_input bad_zero "^mygpt-ddp: error: --time-budget: '0s' is no time" "$WORK/bad" \
  "${common[@]}" --time-budget 0s --out "$WORK/bad"
expect_bad_input bad_warmup "^mygpt-ddp: error: --warmup-steps has no effect with --time-budget" "$WORK/bad" \
  "${common[@]}" --time-budget 5m --warmup-steps 10 --out "$WORK/bad"

# The test clock: one second a reading, so a 6 s budget stops before step 5 (k + 1 seconds before step k).
export MYGPT_TEST_BUDGET_CLOCK=1
if expect_ok fake "${common[@]}" --time-budget 6s --out "$WORK/fake"; then
  check "a 6 s budget on the test clock stops after 5 steps" grep -q '^time budget spent: 6.0s of 6s, after 5 steps$' "$WORK/fake.out"
  check "... and ends with val_bpb ($(last_line fake))" grep -qE "$val_bpb_line" <(last_line fake)
fi

# Resumed: 4 steps of a 10 s budget (stopped by --steps) leave 5 s spent in the checkpoint; the resumed run
# takes its budget from it and trains steps 4..7; once more, nothing is left.
if expect_ok first "${common[@]}" --time-budget 10s --steps 4 --out "$WORK/resume"; then
  if expect_ok resumed "${common[@]}" --resume auto --steps 1000 --out "$WORK/resume"; then
    check "the resumed run counts the time spent before it" grep -q '^time budget: 5.0s of 10s spent before this resume; 5.0s left$' "$WORK/resumed.out"
    check "... and stops when the whole budget is spent (after 8 steps in all)" grep -q '^time budget spent: 10.0s of 10s, after 8 steps$' "$WORK/resumed.out"
    check "... with val_bpb last ($(last_line resumed))" grep -qE "$val_bpb_line" <(last_line resumed)
    if expect_ok spent "${common[@]}" --resume auto --out "$WORK/resume"; then
      check "a run whose budget is spent has nothing to train" grep -q 'nothing to train: the run has spent its --time-budget 10s' "$WORK/spent.out"
    fi
  fi
fi

# Two ranks whose clocks disagree stop together, at rank 0's step.
if [[ ${#MPIRUN[@]} -eq 0 ]]; then
  skip "two ranks (no mpirun)"
else
  for ticks in 1,5 1,0.2; do
    export MYGPT_TEST_BUDGET_CLOCK=$ticks
    name=np2_${ticks/,/_}
    run_np 2 "$name" "${common[@]}" --time-budget 6s --out "$WORK/$name"
    check "2 ranks, clocks of $ticks s a reading: the job ends (exit $RC: $(tail -c 300 "$WORK/$name.err"))" test "$RC" -eq 0
    check "... both at rank 0's step 5" grep -q '^time budget spent: 6.0s of 6s, after 5 steps$' "$WORK/$name.out"
    check "... with one val_bpb line, last" bash -c "[[ \$(grep -c '^val_bpb: ' '$WORK/$name.out') -eq 1 ]] && tail -n 1 '$WORK/$name.out' | grep -qE '$val_bpb_line'"
  done
  unset MYGPT_TEST_BUDGET_CLOCK
  run_np 2 np2_real "${common[@]}" --time-budget 2s --out "$WORK/np2_real"
  check "2 ranks on the real clock: the job ends (exit $RC: $(tail -c 300 "$WORK/np2_real.err"))" test "$RC" -eq 0
  check "... with val_bpb last" grep -qE "$val_bpb_line" <(tail -n 1 "$WORK/np2_real.out")
fi
finish
