#!/usr/bin/env bash
# --precision fp16 through the binary under mpirun (fp16 autocast runs on the CPU too), with its
# dynamic loss scale. An overflow is injected into ONE rank's gradients (MYGPT_TEST_INJECT_OVERFLOW,
# launcher/run_builder.cpp), as an fp16 backward produces one:
#  (a) 2 ranks x accumulation 2 == 1 rank x accumulation 4, the 2-rank run's overflow on rank 1 only, the
#      single run's at the same step: every rank skips that step. The two runs round differently (another
#      order of additions; a CPU with native fp16 instructions rounds otherwise than one that emulates them:
#      3e-5 held on AMD EPYC, 8e-5 was seen on an Intel Xeon with AVX512-FP16), so the bounds follow from
#      fp16's unit roundoff and the run's learning rates (compare_runs.py fp16-adamw says how): losses and
#      gradient norms per step, the median weight tightly, every weight within AdamW's own bound. Without
#      biases: the attention's key bias has a gradient of exactly zero in theory, so what it gets is rounding
#      noise, which AdamW turns into steps of a whole learning rate;
#  (b) both runs report the same loss scales step by step: 4096, halved by the overflow, doubled after
#      3 good steps;
#  (c) --zero 1 == --zero 0 in fp16 on 2 ranks, bit for bit;
#  (d) 2 ranks stopped at their step-5 checkpoint and resumed == 12 steps straight, bit for bit (the
#      loss scale and its count of good steps come back with the checkpoint).
#
# usage: fp16_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
use_mpirun
make_work_dir fp16

common=(train builtin:sort --preset tiny --steps 12 --batch-size 4 --seq-len 32 --lr 1e-3 --min-lr 1e-4
        --warmup-steps 2 --seed 77 --data-order sequential --eval-every 0 --log-every 1 --grad-clip 1.0
        --bias false --threads 1 --device cpu --precision fp16 --loss-scale-init 4096 --loss-scale-growth-interval 3)

train_run() {
  local name=$1 ranks=$2 accum=$3 inject=$4
  shift 4
  # Open MPI's launcher passes its environment on to the ranks it starts on this node.
  MYGPT_TEST_INJECT_OVERFLOW=$inject run_np "$ranks" "$name" "${common[@]}" --grad-accum "$accum" --out "$WORK/$name" "$@"
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed" "exit $RC: $(tail -c 400 "$WORK/$name.err")"
    return 1
  fi
}

train_run single 1 4 0:2
train_run ranks2 2 2 1:2
train_run ranks2_zero1 2 2 1:2 --zero 1
train_run no_skip 2 2 ""  # a control: step 2 taken, as if one rank's overflow had been missed

check "fp16 is announced" grep -q "| fp16 autocast with dynamic loss scaling$" "$WORK/ranks2.out"
for run in single ranks2; do
  check "$run: step 2 is skipped as an overflow at scale 4096" \
    grep -q "^step 2 | skipped: gradients overflowed fp16 at loss scale 4096; the scale is now 2048" "$WORK/$run.out"
done
scales() { metric_values loss_scale "$WORK/$1/metrics.jsonl" | awk '{ printf "%g ", $1 }'; }
expected="4096 4096 4096 2048 2048 2048 4096 4096 4096 8192 8192 8192 "
check "(b) 1 rank: loss scales $(scales single)" test "$(scales single)" = "$expected"
check "(b) 2 ranks, the overflow on rank 1 only: the same loss scales" test "$(scales ranks2)" = "$expected"
skips=$(metric_values skipped "$WORK/ranks2/metrics.jsonl" | grep -c true)
check "(a) exactly one skipped step in the 2-rank run ($skips)" test "$skips" -eq 1

pair() { echo "$3|$WORK/$1|$WORK/$2|same"; }
different() { echo "$3|$WORK/$1|$WORK/$2|different"; }
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" fp16-adamw \
  "$(pair ranks2 single "(a) 2 ranks x accum 2 == 1 rank x accum 4 in fp16, through an overflow on one rank")" \
  "$(different no_skip single "control: the same run with step 2 taken instead of skipped is told apart")" 2>&1)
comparison+=$'\n'$("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 \
  "$(pair ranks2_zero1 ranks2 "(c) fp16: --zero 1 == --zero 0 bit for bit")" 2>&1)

# (d) The 2-rank run again, stopped at its checkpoint of step 5 (scale 2048 there, with two of the three
# good steps it needs to grow counted), then resumed to 12.
train_run stopped 2 2 1:2 --checkpoint-every 5
ckpt5=$(ls "$WORK"/stopped/ckpt_00000005.* 2>/dev/null)
if [[ -n $ckpt5 ]] && ls "$WORK"/stopped/ckpt_00000012.* >/dev/null 2>&1; then
  rm -f "$WORK"/stopped/ckpt_0000001[02].*
  awk -F'"step":' '{ split($2, a, ","); if (a[1] + 0 < 5) print }' "$WORK/stopped/metrics.jsonl" >"$WORK/kept.jsonl"
  mv "$WORK/kept.jsonl" "$WORK/stopped/metrics.jsonl"
  train_run stopped 2 2 1:2 --checkpoint-every 5 --resume auto
  check "(d) resumed at step 5" grep -q "resumed from .*ckpt_00000005.* at step 5" "$WORK/stopped.out"
  check "(d) the resumed run's loss scales are the straight run's" test "$(scales stopped)" = "$expected"
  comparison+=$'\n'$("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 \
    "$(pair stopped ranks2 "(d) fp16 on 2 ranks: stopped at step 5 and resumed == straight, bit for bit")" 2>&1)
else
  fail "(d) no checkpoints at steps 5 and 12" "$(ls "$WORK/stopped" 2>&1 | tr '\n' ' ')"
fi
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 4 ]] || fail "checkpoint comparison did not report all 4 pairs"

finish
