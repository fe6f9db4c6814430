#!/usr/bin/env bash
# How a job of several ranks behaves (DESIGN: rank 0 alone writes files and prints progress; a failing
# rank brings the whole job down with a non-zero exit; ranks must run the same configuration).
#
# usage: rank_behaviour_test.sh PATH/TO/mygpt-ddp [PATH/TO/python]   (python is not needed here)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
use_mpirun
mpirun=("${MPIRUN[@]}" -np 2)
make_work_dir rank_behaviour
RUN_TIMEOUT=60

now() { now_seconds; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
faster_than() { awk -v s="$1" -v limit="$2" 'BEGIN { exit !(s < limit) }'; }

# MPI on CPU: --device cpu, so that a machine with GPUs runs the same test.
tiny=(--preset tiny --batch-size 4 --seq-len 32 --eval-every 0 --threads 1 --device cpu)

# Each rank gets its own working directory; the options are the same, so relative paths (--out, the
# data file) resolve per rank. That shows who writes, and lets one rank alone miss a file.
mkdir -p "$WORK/rank0" "$WORK/rank1"
seq 1 3000 >"$WORK/rank0/data.txt"
per_rank_dirs="cd '$WORK'/rank\$OMPI_COMM_WORLD_RANK && exec \"\$0\" \"\$@\""

# --- (1) only rank 0 writes and prints ------------------------------------------------------------
steps=10
run_cmd tagged "${mpirun[@]}" --tag-output bash -c "$per_rank_dirs" "$BIN" train builtin:sort "${tiny[@]}" \
  --steps $steps --log-every 1 --checkpoint-every 5 --out out
rc=$RC
check "(1) a 2-rank run succeeds (exit $rc)" test "$rc" -eq 0
listing=$(cd "$WORK/rank0/out" 2>/dev/null && ls -A | tr '\n' ' ')
check "(1) rank 0's --out holds one metrics.jsonl, run.json and the checkpoints of steps 5 and 10 (has: $listing)" \
  test "$listing" = "ckpt_00000005.safetensors ckpt_00000010.safetensors metrics.jsonl run.json "
check "(1) rank 1 wrote nothing (no --out directory in its working directory)" test ! -e "$WORK/rank1/out"
metric_steps=$(metric_values step "$WORK/rank0/out/metrics.jsonl" 2>/dev/null | tr '\n' ' ')
check "(1) metrics.jsonl has one record per step, written once (steps: $metric_steps)" \
  test "$metric_steps" = "$(seq 0 $((steps - 1)) | tr '\n' ' ')"
other_rank_lines=$(grep -c '^\[[0-9]*,1\]' "$WORK/tagged.out" "$WORK/tagged.err" | awk -F: '{ n += $2 } END { print n }')
check "(1) rank 1 printed nothing on stdout or stderr ($other_rank_lines line(s))" test "$other_rank_lines" -eq 0
progress_ok=true
for ((s = 0; s < steps; ++s)); do
  n=$(grep -cE "^\[[0-9]+,0\]<stdout>:step +$s \| loss" "$WORK/tagged.out")
  [ "$n" -eq 1 ] || { progress_ok=false; echo "     | 'step $s | loss' printed $n time(s)"; }
done
check "(1) one progress stream: each 'step N | loss' line printed once, by rank 0" $progress_ok

# --- (4) the world line, once ---------------------------------------------------------------------
run_cmd world "${mpirun[@]}" "$BIN" train builtin:sort "${tiny[@]}" --steps 2 --out "$WORK/world"
rc=$RC
n=$(cat "$WORK/world.out" "$WORK/world.err" | grep -cF "world: 2 rank(s) on 1 node(s), 2 per node | backend mpi")
check "(4) mpirun -np 2 prints 'world: 2 rank(s) on 1 node(s), 2 per node | backend mpi' once (exit $rc, $n time(s))" \
  test "$rc" -eq 0 -a "$n" -eq 1

# --- (2) a rank that dies mid-run takes the job down ----------------------------------------------
# Rank 1 is killed (SIGKILL: no chance to clean up) once rank 0 has printed a training step, in a run
# far too long to finish. A watcher beside rank 1 kills it: rank 1 is exec'ed, so it keeps the PID ($$)
# that mpirun started, and mpirun sees its own rank die.
killer='if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
  ( for _ in $(seq 600); do grep -qE "^step +[0-9]+ \| loss" "$KILLED_OUT" && break; sleep 0.1; done
    perl -MTime::HiRes=time -e "printf qq(%.6f\n), time" >"$KILLED_AT"; kill -KILL $$ ) </dev/null >/dev/null 2>&1 &
fi
exec "$@"'
start=$(now)
KILLED_OUT=$WORK/killed.out KILLED_AT=$WORK/killed.at run_cmd killed "${mpirun[@]}" -x KILLED_OUT -x KILLED_AT \
  bash -c "$killer" bash "$BIN" train builtin:sort "${tiny[@]}" --steps 1000000 --log-every 100 --out "$WORK/killed"
rc=$RC
killed_at=$(cat "$WORK/killed.at" 2>/dev/null || echo "$start")
took=$(seconds_since "$killed_at")
check "(2) killing rank 1 mid-run ends mpirun non-zero (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "(2) ... within 30 s of the kill (took $took s, $(seconds_since "$start") s in all)" faster_than "$took" 30
check "(2) ... after training had started" grep -qE '^step +[0-9]+ \| loss' "$WORK/killed.out"

# A rank that stalls (SIGSTOP: alive, silent, holding its sockets) blocked every MPI collective forever:
# rank 0 now gives up on its collective after --comm-timeout, names it, and the job ends non-zero.
stopper=${killer//-KILL/-STOP}
stopper=${stopper//KILLED_/STOPPED_}
start=$(now)
STOPPED_OUT=$WORK/stopped.out STOPPED_AT=$WORK/stopped.at run_cmd stopped "${mpirun[@]}" -x STOPPED_OUT -x STOPPED_AT \
  bash -c "$stopper" bash "$BIN" train builtin:sort "${tiny[@]}" --steps 1000000 --log-every 100 --comm-timeout 5 \
  --out "$WORK/stopped"
rc=$RC
stopped_at=$(cat "$WORK/stopped.at" 2>/dev/null || echo "$start")
took=$(seconds_since "$stopped_at")
check "(2) stopping rank 1 (SIGSTOP) mid-run ends mpirun non-zero (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "(2) ... within --comm-timeout 5 s + 20 s of the stop (took $took s)" faster_than "$took" 25
check "(2) ... with rank 0's line naming the MPI collective and the timeout: $(grep -m1 '^rank 0: ' "$WORK/stopped.err")" \
  grep -qE "^rank 0: mygpt-ddp: error: MPI_[A-Za-z]+ did not finish within --comm-timeout 5 s" "$WORK/stopped.err"

# Rank 1 stops with an error of its own: its working directory lacks the data file.
start=$(now)
run_cmd missing "${mpirun[@]}" bash -c "$per_rank_dirs" "$BIN" train data.txt "${tiny[@]}" --steps 1000000 \
  --out out_missing
rc=$RC
took=$(seconds_since "$start")
check "(2) rank 1 failing on a missing data file ends mpirun non-zero (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "(2) ... within 30 s (took $took s)" faster_than "$took" 30
check "(2) ... with rank 1's one-line error: $(grep -m1 '^rank 1: ' "$WORK/missing.err")" \
  grep -q "^rank 1: mygpt-ddp: error: data file 'data.txt' does not exist" "$WORK/missing.err"

# Our line comes first, before Open MPI's abort block ("MPI_ABORT was invoked on rank 1 ..."), which
# travels by another channel and came first in about 2 runs of 5 (issue 40). A bad input on rank 1 alone
# (rank 0 waits in the configuration check meanwhile): exit 2, and the first line of stderr is ours.
first_lines=()
for try in 1 2 3 4 5; do
  run_cmd "bad_on_one_$try" "${mpirun[@]}" bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$@" --lr abc; else exec "$@"; fi' \
    bash "$BIN" train builtin:sort "${tiny[@]}" --steps 10 --out "$WORK/bad_on_one_$try"
  first=$(grep -m1 -v '^[[:space:]]*$' "$WORK/bad_on_one_$try.err")
  [[ $RC -eq 2 && $first == "rank 1: mygpt-ddp: error: "*--lr* ]] || first_lines+=("exit $RC, first line: $first")
done
check "(2) a bad --lr on rank 1 alone: exit 2 and rank 1's line before Open MPI's block, 5 runs of 5 ($(printf '%s; ' "${first_lines[@]}"))" \
  test "${#first_lines[@]}" -eq 0

# --- (3) ranks with different configurations are refused at start -------------------------------
start=$(now)
run_cmd mismatch "${mpirun[@]}" bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$@" --lr 2e-3; else exec "$@"; fi' \
  bash "$BIN" train builtin:sort "${tiny[@]}" --steps 1000000 --out "$WORK/mismatch"
rc=$RC
took=$(seconds_since "$start")
check "(3) ranks started with different --lr: mpirun exits non-zero (exit $rc, $took s)" \
  test "$rc" -ne 0 -a "$rc" -ne 124
check "(3) ... with a message naming the cause: $(grep -m1 'different configurations' "$WORK/mismatch.err")" \
  grep -q "different configurations" "$WORK/mismatch.err"
# Both ranks may report at once; each report must stay one whole line that names its rank.
bad_lines=$(grep 'mygpt-ddp: error:' "$WORK/mismatch.err" | grep -cvE '^rank [01]: mygpt-ddp: error: ')
check "(3) ... every error line is whole and starts with its rank ($bad_lines mangled)" test "$bad_lines" -eq 0
check "(3) ... before any training step" bash -c "! grep -q 'step .* | loss' '$WORK/mismatch.out'"

# --- (5) stop signals: a checkpoint, exit 0, and a second signal cannot lose it ----------------------
# wait_for_step LOG: until the run in LOG has printed a training step (at most 60 s).
wait_for_step() { for _ in $(seq 600); do grep -qE '^step +[0-9]+ \| loss' "$1" && return 0; sleep 0.1; done; return 1; }

"$BIN" train builtin:sort "${tiny[@]}" --steps 1000000 --log-every 20 --out "$WORK/twice" \
  >"$WORK/twice.out" 2>"$WORK/twice.err" &
pid=$!
wait_for_step "$WORK/twice.out"
kill -TERM $pid
kill -TERM $pid  # back to back: an impatient user or a launcher repeating itself
wait $pid
rc=$?
check "(5) two SIGTERMs back to back: exit 0 after the checkpoint (exit $rc)" test "$rc" -eq 0
check "(5) ... the checkpoint was written: $(ls "$WORK/twice" 2>/dev/null | grep ckpt_ | tr '\n' ' ')" \
  bash -c "ls '$WORK/twice' | grep -q '^ckpt_.*\.safetensors$'"
check "(5) ... and said so" grep -q "stopped early; continue with --resume auto" "$WORK/twice.out"

"${mpirun[@]}" "$BIN" train builtin:sort "${tiny[@]}" --steps 1000000 --log-every 20 --out "$WORK/usr1" \
  >"$WORK/usr1.out" 2>"$WORK/usr1.err" &
pid=$!
wait_for_step "$WORK/usr1.out"
kill -USR1 $pid  # mpirun forwards SIGUSR1 to every rank
wait $pid
rc=$?
check "(5) SIGUSR1 to mpirun: every rank stops at one step and the job exits 0 (exit $rc)" test "$rc" -eq 0
saved=$(ls "$WORK/usr1" 2>/dev/null | grep -c '^ckpt_')
check "(5) ... with one checkpoint ($saved)" test "$saved" -eq 1
at=$(ls "$WORK/usr1" | sed -n 's/^ckpt_0*\([0-9][0-9]*\)\.safetensors$/\1/p' | head -1)
run_np 2 usr1_resume train builtin:sort "${tiny[@]}" --steps $((${at:-0} + 2)) --resume auto --out "$WORK/usr1"
check "(5) ... from which --resume auto continues (exit $RC)" grep -q "resumed from $WORK/usr1/ckpt_.* at step ${at:-?}" \
  "$WORK/usr1_resume.out"

finish
