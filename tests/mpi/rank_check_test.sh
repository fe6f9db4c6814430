#!/usr/bin/env bash
# --check-ranks-every through the binary under mpirun -np 2 (trainer/rank_consistency.h):
#   ranks that agree train to the end with the check every step, and nothing more is printed;
#   a planted difference (MYGPT_TEST_PERTURB_RANK=1:2, a test-only fault: one value of rank 1's parameters
#   moved to the next float after step 2) stops the job at the next check (after step 3 with the check
#   every 2 steps) with exit 1 and one line, rank 0's, naming the step and the rank that differs; no
#   checkpoint of the torn state is written.
# usage: rank_check_test.sh PATH/TO/mygpt-ddp
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
use_mpirun
make_work_dir rank_check
common=(train builtin:sort --preset tiny --seq-len 32 --batch-size 4 --steps 6 --eval-every 0 --log-every 1
        --threads 1 --device cpu)

run_np 2 agree "${common[@]}" --check-ranks-every 1 --out "$WORK/agree"
check "ranks that agree, checked every step: the run ends (exit $RC: $(tail -c 300 "$WORK/agree.err"))" test "$RC" -eq 0
check "... and the check printed nothing" bash -c "! grep -qi 'checksum\|differ' '$WORK/agree.out' '$WORK/agree.err'"

export MYGPT_TEST_PERTURB_RANK=1:2
run_np 2 planted "${common[@]}" --check-ranks-every 2 --checkpoint-every 1 --out "$WORK/planted"
errors=$(grep -c 'mygpt-ddp: error' "$WORK/planted.err")
line=$(grep -m1 'mygpt-ddp: error' "$WORK/planted.err")
check "a planted difference stops the job with exit 1 (exit $RC)" test "$RC" -eq 1
check "... in one line (of $errors): $line" test "$errors" -eq 1
check "... rank 0's, naming the step and the rank that differs" bash -c "[[ '$line' == 'rank 0: mygpt-ddp: error: after step 3 the ranks hold different parameters (--check-ranks-every 2): rank 0 holds parameters of checksum '*'; rank 1 holds parameters of checksum '* ]]"
check "... after step 3 was logged, and no step after it" bash -c "grep -q '^step     3 ' '$WORK/planted.out' && ! grep -q '^step     4 ' '$WORK/planted.out'"
check "... with no checkpoint of the torn step 4" test ! -e "$WORK/planted/ckpt_00000004.safetensors"
run_np 2 unchecked "${common[@]}" --out "$WORK/unchecked"
unset MYGPT_TEST_PERTURB_RANK
check "without --check-ranks-every the same fault goes unseen (exit $RC): the check is what catches it" test "$RC" -eq 0
finish
