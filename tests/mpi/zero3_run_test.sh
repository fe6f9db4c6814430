#!/usr/bin/env bash
# --zero 3 through the binary on 2 ranks, where no rank holds the whole model:
#  (a) --sample-every: every rank runs the sample's forwards (each gathers the units), rank 0 alone prints,
#      and the samples equal a --zero 0 run's, as do the losses;
#  (b) a rank killed in the middle of a gather (SIGKILL from the MPI backend's test hook
#      MYGPT_TEST_SIGNAL_IN_ALL_GATHER: rank 1 dies at its first all-gather once the step-2 checkpoint
#      exists, while rank 0 is in it) ends the job non-zero within --comm-timeout, mpirun's one line naming
#      the rank and the signal (it ends rank 0 itself: no line of ours, no stack dump), and the checkpoint
#      written before is intact: the run resumed in place from it continues bit for bit as a run that never
#      stopped;
#  (c) a rank hung in a gather (SIGSTOP: alive, silent) ends the job within --comm-timeout with rank 0's
#      one line naming the collective, the checkpoint intact as in (b).
#
# usage: zero3_run_test.sh PATH/TO/mygpt-ddp [PATH/TO/python]   (python is not needed here)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
use_mpirun
[[ ${#MPIRUN[@]} -gt 0 ]] || { skip "no mpirun on the PATH"; finish; }
make_work_dir zero3_run
RUN_TIMEOUT=180

# Character text with a tokenizer of its own (a sample needs one): 4 layers, so the units are 7.
awk 'BEGIN { srand(3); split("the king shall not speak of thee my lord and her grace to be", w, " ");
             for (i = 0; i < 3000; ++i) { line = ""; for (j = 0; j < 8; ++j) line = line w[int(rand() * 14) + 1] " "; print line } }' \
  >"$WORK/text.txt"
common=(train "$WORK/text.txt" --preset tiny --n-layer 4 --n-embd 32 --n-head 4 --block-size 32 --batch-size 2
        --seq-len 32 --lr 1e-3 --warmup-steps 1 --seed 7 --data-order sequential --eval-every 0 --log-every 1
        --threads 1 --device cpu)

# --- (a) samples ------------------------------------------------------------------------------------
sampled=(--steps 6 --sample-every 3 --sample-tokens 24 --sample-prompt "the king")
run_np 2 sample_zero0 "${common[@]}" "${sampled[@]}" --zero 0 --out "$WORK/sample_zero0"
rc0=$RC
run_np 2 sample_zero3 "${common[@]}" "${sampled[@]}" --zero 3 --out "$WORK/sample_zero3"
rc3=$RC
check "(a) 2 ranks with --sample-every 3 run at --zero 0 and --zero 3 (exit $rc0, $rc3: $(tail -c 200 "$WORK/sample_zero3.err"))" \
  test "$rc0" -eq 0 -a "$rc3" -eq 0
samples() { grep '"sample"' "$1/metrics.jsonl" 2>/dev/null | sed 's/.*"sample":\("[^"]*\(\\"[^"]*\)*"\).*/\1/'; }
count=$(samples "$WORK/sample_zero3" | wc -l)
check "(a) --zero 3 sampled at steps 0, 3 and the end: 3 samples in metrics.jsonl ($count)" test "$count" -eq 3
check "(a) ... the same samples as --zero 0's ($(samples "$WORK/sample_zero3" | head -n 1) / $(samples "$WORK/sample_zero0" | head -n 1))" \
  test "$(samples "$WORK/sample_zero3")" = "$(samples "$WORK/sample_zero0")"
check "(a) ... and the same losses" \
  test "$(metric_values loss "$WORK/sample_zero3/metrics.jsonl")" = "$(metric_values loss "$WORK/sample_zero0/metrics.jsonl")"
printed=$(grep -c '^step .* | sample:$' "$WORK/sample_zero3.out")
check "(a) ... printed once per sample, by rank 0 alone ($printed 'sample:' lines)" test "$printed" -eq 3

# --- (b), (c) a rank lost during a gather ---------------------------------------------------------------
# The learning rate is constant after step 0 (--min-lr = --lr), so a run of 1000 steps and one of 4 share
# their first steps' updates.
timeout_s=10
run_np 2 unbroken "${common[@]}" --zero 3 --steps 4 --out "$WORK/unbroken"
check "(b) an unbroken 4-step run for the comparison (exit $RC)" test "$RC" -eq 0
losses_of() { grep -E '"step":(2|3),' "$1" | grep -o '"loss":[^,}]*'; }

# lost NAME KILL|STOP: the job of 1000 steps whose rank 1 gets the signal in its first gather after the
# step-2 checkpoint; then checks of the checkpoint, resumed in place for steps 2 and 3.
lost() {
  local name=$1 signal=$2 label=$3
  local checkpoint="$WORK/$name/ckpt_00000002.safetensors"
  local start took
  start=$(now_seconds)
  run_cmd "$name" "${MPIRUN[@]}" -np 2 -x MYGPT_TEST_SIGNAL_IN_ALL_GATHER="1:$signal:$checkpoint" "$BIN" \
    "${common[@]}" --zero 3 --steps 1000 --checkpoint-every 2 --keep-checkpoints 2 --comm-timeout "$timeout_s" \
    --out "$WORK/$name"
  local rc=$RC
  took=$(awk -v a="$start" -v b="$(now_seconds)" 'BEGIN { printf "%.1f", b - a }')
  check "($label) rank 1 $signal in a gather: the job ends non-zero (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
  check "($label) ... within --comm-timeout $timeout_s s + 30 s of its start (took $took s)" \
    awk -v s="$took" -v limit=$((timeout_s + 30)) 'BEGIN { exit !(s < limit) }'
  check "($label) ... after the step-2 checkpoint" test -f "$checkpoint"
  local noise
  noise=$(grep -cE 'terminate called|Exception raised from|frame #|Segmentation' "$WORK/$name.err")
  check "($label) ... without a stack dump or a crash ($noise line(s))" test "$noise" -eq 0
  local partial
  partial=$(cd "$WORK/$name" 2>/dev/null && ls -A | grep -v -E '^(ckpt_[0-9]{8}\.safetensors|metrics\.jsonl|run\.json|run\.lock)$' | tr '\n' ' ')
  check "($label) ... and no partial file in --out (others: '${partial}')" test -z "$partial"
  # mpirun may exit while the rank it signalled is still ending (under load: seconds), and that rank still
  # holds --out's claim, which a new run rightly refuses: wait for the job's last process first.
  local waited=0
  while pgrep -f -- "--out $WORK/$name\$" >/dev/null && (( waited < 300 )); do sleep 0.1; waited=$((waited + 1)); done
  # The newest checkpoint is step 2's (rank 1 was lost in step 2): --resume auto takes it, in the same --out
  # (the dead run's claim is taken over).
  run_np 2 "${name}_resumed" "${common[@]}" --zero 3 --steps 4 --resume auto --out "$WORK/$name"
  check "($label) the run resumes in place (exit $RC: $(grep -m2 -E "error|mygpt" "$WORK/${name}_resumed.err"))" test "$RC" -eq 0
  check "($label) ... from step 2 ($(grep -m1 'resumed from' "$WORK/${name}_resumed.out"))" \
    grep -q 'ckpt_00000002' "$WORK/${name}_resumed.out"
  check "($label) ... and continues bit for bit ($(losses_of "$WORK/$name/metrics.jsonl" | tr '\n' ' '))" \
    test -n "$(losses_of "$WORK/$name/metrics.jsonl")" -a \
    "$(losses_of "$WORK/$name/metrics.jsonl")" = "$(losses_of "$WORK/unbroken/metrics.jsonl")"
}

lost killed KILL b
line=$(grep -m1 'exited on signal 9' "$WORK/killed.err")
check "(b) mpirun's line names rank 1 and the signal: $line" grep -q 'process rank 1 .*exited on signal 9' "$WORK/killed.err"
ours=$(grep -c 'mygpt-ddp: error:' "$WORK/killed.err")
check "(b) ... and no rank printed a line of its own (mpirun ended rank 0: $ours)" test "$ours" -eq 0

lost stopped STOP c
ours=$(grep -c 'mygpt-ddp: error:' "$WORK/stopped.err")
check "(c) one line of ours ($ours): $(grep -m1 'mygpt-ddp: error:' "$WORK/stopped.err")" test "$ours" -eq 1
check "(c) ... rank 0's, naming the all-gather and --comm-timeout" \
  grep -qE "^rank 0: mygpt-ddp: error: MPI_Allgather did not finish within --comm-timeout $timeout_s s" "$WORK/stopped.err"

finish
