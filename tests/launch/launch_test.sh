#!/usr/bin/env bash
# Jobs started without MPI, on CPU over Gloo, through the binary:
#   (1) torchrun: N ranks x A == 1 rank x N*A (2 and 3 ranks, --zero 1, Muon), one world line, rank 0
#       alone writing; SIGTERM to torchrun stops every rank at one step with a checkpoint that
#       --resume auto continues bit for bit; an elastic restart after kill -9 of a worker continues
#       bit for bit (losses and final weights equal to an uninterrupted run).
#   (2) plain RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, and srun without MPI (a fake srun: the variables
#       Slurm gives each task) for 1, 2, 4 and 8 tasks: the same job as torchrun's.
#   (3) --rendezvous file:DIR, also over a stale rendezvous of a dead job; a live job's folder refused.
#   (4) bad launches: exit 2 with one line (or 1 for a rank that never comes), within the timeout, and
#       nothing written into --out.
#
# usage: launch_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch PATH/TO/torchrun
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
torchrun=${3:-torchrun}
make_work_dir launch
RUN_TIMEOUT=120
unset OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_RANK PMI_SIZE RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR \
  MASTER_PORT TORCHELASTIC_RUN_ID SLURM_PROCID SLURM_STEP_NUM_TASKS SLURM_JOB_ID

now() { now_seconds; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Every run adds --steps, --log-every, and --batch-size where it differs.
base=(train builtin:sort --preset tiny --seq-len 32 --min-lr 1e-4 --warmup-steps 2 --seed 4242 --eval-every 0
      --threads 1 --device cpu --data-order sequential)
common=("${base[@]}" --batch-size 4 --lr 1e-3)

# torchrun_job NAME RANKS ARGS...: the binary on RANKS ranks under torchrun (a free port each time).
torchrun_job() {
  local name=$1 ranks=$2
  shift 2
  run_cmd "$name" "$torchrun" --standalone --nproc-per-node "$ranks" --no-python "$BIN" "$@"
}

# env_job NAME RANKS VARIABLES ARGS...: RANKS processes started by hand; VARIABLES (a function of the
# rank r, printing NAME=VALUE words) gives each its launcher variables. Rank r's output goes to NAME.out
# and NAME.err for rank 0, NAME.rR.out/.err for the others; RC is the first non-zero exit code.
env_job() {
  local name=$1 ranks=$2 variables=$3
  shift 3
  local pids=() r out
  for ((r = 0; r < ranks; ++r)); do
    out=$WORK/$name; [[ $r -gt 0 ]] && out=$WORK/$name.r$r
    # shellcheck disable=SC2046  # one word per variable
    (export $($variables "$r" "$ranks"); with_timeout "$RUN_TIMEOUT" "$BIN" "$@") >"$out.out" 2>"$out.err" &
    pids+=($!)
  done
  RC=0
  for pid in "${pids[@]}"; do wait "$pid" || { local rc=$?; [[ $RC -eq 0 ]] && RC=$rc; }; done
}
torch_variables() { echo "RANK=$1 WORLD_SIZE=$2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT"; }
# What srun gives task r of an N-task step on one node (no MPI plugin: no PMI variables).
slurm_variables() {
  echo "SLURM_PROCID=$1 SLURM_STEP_NUM_TASKS=$2 SLURM_LOCALID=$1 SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=$2"
  echo "SLURM_STEP_NUM_NODES=1 SLURM_JOB_NODELIST=localhost SLURM_JOB_ID=$JOB_ID SLURM_STEP_ID=0 ${SLURM_PORT:-}"
}

trained() {  # trained NAME RANKS LAUNCHER: the run succeeded as one job of RANKS ranks
  local name=$1 ranks=$2 launcher=$3 world
  world=$(grep -c "^world: $ranks rank(s) .*| launcher $launcher" "$WORK/$name.out")
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed (exit $RC)" "$(grep -h 'error' "$WORK/$name"*.err | head -3)"
    return 1
  elif [[ $world -ne 1 ]]; then
    fail "$name: expected one 'world: $ranks rank(s) ... launcher $launcher' line, got $world" "$(grep -h '^world:' "$WORK/$name.out")"
    return 1
  fi
}

# --- (1) torchrun ---------------------------------------------------------------------------------
run single_accum2 "${common[@]}" --steps 20 --log-every 5 --grad-accum 2 --out "$WORK/single_accum2"
run single_accum6 "${common[@]}" --steps 20 --log-every 5 --grad-accum 6 --out "$WORK/single_accum6"
run single_accum2_zero "${common[@]}" --steps 20 --log-every 5 --grad-accum 2 --out "$WORK/single_accum2_zero"
run single_accum2_muon "${common[@]}" --steps 20 --log-every 5 --grad-accum 2 --optimizer muon --out "$WORK/single_accum2_muon"
torchrun_job torchrun2 2 "${common[@]}" --steps 20 --log-every 5 --grad-accum 1 --out "$WORK/torchrun2"
trained torchrun2 2 torchrun
torchrun_job torchrun3 3 "${common[@]}" --steps 20 --log-every 5 --grad-accum 2 --out "$WORK/torchrun3"
trained torchrun3 3 torchrun
torchrun_job torchrun2_zero 2 "${common[@]}" --steps 20 --log-every 5 --grad-accum 1 --zero 1 --out "$WORK/torchrun2_zero"
trained torchrun2_zero 2 torchrun
torchrun_job torchrun2_muon 2 "${common[@]}" --steps 20 --log-every 5 --grad-accum 1 --optimizer muon --out "$WORK/torchrun2_muon"
trained torchrun2_muon 2 torchrun
check "(1) torchrun: the rendezvous is logged once ($(grep -h '^rendezvous:' "$WORK/torchrun2.out"))" \
  test "$(grep -c '^rendezvous: tcp://.*, 2 rank(s) joined in' "$WORK/torchrun2.out")" -eq 1
listing=$(cd "$WORK/torchrun2" 2>/dev/null && ls -A | tr '\n' ' ')
check "(1) torchrun: one --out with the checkpoint, metrics and run.json ($listing)" \
  test "$listing" = "ckpt_00000020.safetensors metrics.jsonl run.json "
check "(1) torchrun: only rank 0 printed progress" test "$(grep -c '^step  *5 | loss' "$WORK/torchrun2.out")" -eq 1

# --- (2) plain variables and srun without MPI ----------------------------------------------------
PORT=$(free_port)
env_job env2 2 torch_variables "${common[@]}" --steps 20 --log-every 5 --grad-accum 1 --out "$WORK/env2"
trained env2 2 env
check "(2) plain variables: ranks other than 0 print nothing ($(cat "$WORK/env2.r1.out" "$WORK/env2.r1.err" | wc -l) lines)" \
  test ! -s "$WORK/env2.r1.out" -a ! -s "$WORK/env2.r1.err"
JOB_ID=$((RANDOM * 7 + 1))
SLURM_PORT="MASTER_PORT=$(free_port)" env_job slurm3 3 slurm_variables "${common[@]}" --steps 20 --log-every 5 --grad-accum 2 \
  --out "$WORK/slurm3"
trained slurm3 3 slurm
for tasks in 1 4 8; do  # 1: a one-task step is a plain process; without MASTER_PORT: the port from the job id
  JOB_ID=$((RANDOM * 7 + tasks)) env_job "slurm_tasks$tasks" $tasks slurm_variables "${base[@]}" --lr 1e-3 --steps 3 \
    --batch-size 2 --log-every 1 --out "$WORK/slurm_tasks$tasks"
  if [[ $tasks -eq 1 ]]; then trained "slurm_tasks$tasks" 1 none; else trained "slurm_tasks$tasks" $tasks slurm; fi &&
    pass "(2) fake srun without MPI, $tasks task(s): one job ($(grep -h '^world:' "$WORK/slurm_tasks$tasks.out"))"
done

# --- (3) the file rendezvous ----------------------------------------------------------------------
rdzv=$WORK/rdzv
mkdir -p "$rdzv/mygpt-rendezvous"
# A dead job's leftovers: its published name (fresh-looking content), its store and its claim.
echo "deadbeefdeadbeef" >"$rdzv/mygpt-rendezvous/current"
echo "garbage" >"$rdzv/mygpt-rendezvous/deadbeefdeadbeef.store"
printf 'host=%s\npid=999999\nsince=2020-01-01T00:00:00Z\ntoken=dead\n' "$(hostname)" >"$rdzv/mygpt-rendezvous/run.lock"
touch -d '2020-01-01' "$rdzv/mygpt-rendezvous/current" "$rdzv/mygpt-rendezvous/run.lock"
file_variables() { echo "RANK=$1 WORLD_SIZE=$2"; }
env_job file2 2 file_variables "${common[@]}" --steps 20 --log-every 5 --grad-accum 1 --rendezvous "file:$rdzv" --out "$WORK/file2"
trained file2 2 env
check "(3) file rendezvous over a dead job's files: logged ($(grep -h '^rendezvous:' "$WORK/file2.out"))" \
  grep -q "^rendezvous: file:$rdzv, 2 rank(s) joined" "$WORK/file2.out"
check "(3) ... and cleaned up after itself ($(ls -A "$rdzv/mygpt-rendezvous" | tr '\n' ' '))" \
  test -z "$(ls -A "$rdzv/mygpt-rendezvous")"

# Every equivalence in one python process.
pair() { echo "$3|$WORK/$1|$WORK/$2|${4:-same}"; }
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 1e-5 \
  "$(pair torchrun2 single_accum2 "(1) torchrun: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair torchrun3 single_accum6 "(1) torchrun: 3 ranks x accum 2 == 1 rank x accum 6")" \
  "$(pair torchrun2_zero single_accum2 "(1) torchrun --zero 1: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair torchrun2_muon single_accum2_muon "(1) torchrun muon: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair env2 single_accum2 "(2) RANK/WORLD_SIZE by hand: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair slurm3 single_accum6 "(2) srun without MPI: 3 tasks x accum 2 == 1 rank x accum 6")" \
  "$(pair file2 single_accum2 "(3) file rendezvous: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair single_accum2 single_accum6 "control: accum 2 and accum 6 runs differ" different)" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 8 ]] || fail "checkpoint comparison did not report all 8 pairs"

# A live job holds its folder: rank 0 of a 2-rank job waits for a rank 1 that never comes.
RANK=0 WORLD_SIZE=2 "$BIN" "${common[@]}" --steps 5 --rendezvous "file:$rdzv" --comm-timeout 60 \
  --out "$WORK/live" >"$WORK/live.out" 2>&1 &
live=$!
for _ in $(seq 100); do [[ -f $rdzv/mygpt-rendezvous/current ]] && break; sleep 0.1; done
RANK=0 WORLD_SIZE=1 expect_bad_input file_live_job "rendezvous file:$rdzv.*(held|in use|claimed|running)" "$WORK/second" \
  "${common[@]}" --steps 5 --rendezvous "file:$rdzv" --out "$WORK/second"
kill $live 2>/dev/null; wait $live 2>/dev/null

# --- (1) stop and restart under torchrun ---------------------------------------------------------
# SIGTERM to torchrun: its agent passes it on; the ranks stop at one step and checkpoint.
long=("${common[@]}" --steps 1000000 --log-every 100)
wait_for() { for _ in $(seq 600); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
"$torchrun" --standalone --nproc-per-node 2 --no-python "$BIN" "${long[@]}" --out "$WORK/term" \
  >"$WORK/term.out" 2>"$WORK/term.err" &
pid=$!
wait_for "$WORK/term.out" '^step +100 \| loss'
kill -TERM $pid
wait $pid
saved=$(ls "$WORK/term" 2>/dev/null | grep -c '^ckpt_')
check "(1) SIGTERM to torchrun: the ranks stopped at one step with one checkpoint ($saved)" \
  grep -q "stopped early; continue with --resume auto" "$WORK/term.out"
at=$(ls "$WORK/term" | sed -n 's/^ckpt_0*\([0-9][0-9]*\)\.safetensors$/\1/p' | head -1)
torchrun_job term_resume 2 "${common[@]}" --steps $((${at:-0} + 5)) --log-every 1 --resume auto --out "$WORK/term"
check "(1) ... which --resume auto continues under torchrun (exit $RC)" \
  grep -q "resumed from $WORK/term/ckpt_.* at step ${at:-?}" "$WORK/term_resume.out"

# Elastic restart: kill -9 of rank 1 after the first checkpoint; torchrun --max-restarts starts the
# group again, which resumes from the newest checkpoint and ends as the uninterrupted run does.
steps=1500
elastic=("${common[@]}" --steps $steps --checkpoint-every 300 --log-every 1 --resume auto)
torchrun_job uninterrupted 2 "${elastic[@]}" --out "$WORK/uninterrupted"
trained uninterrupted 2 torchrun
"$torchrun" --standalone --nproc-per-node 2 --max-restarts 1 --no-python "$BIN" "${elastic[@]}" --out "$WORK/elastic" \
  >"$WORK/elastic.out" 2>"$WORK/elastic.err" &
pid=$!
for _ in $(seq 600); do [[ -f $WORK/elastic/ckpt_00000300.safetensors ]] && break; sleep 0.05; done
victim=""
# Rank 1 by its environment: Linux shows it in /proc; elsewhere (macOS: no /proc) ps -E prints it.
for p in $(pgrep -f -- "--out $WORK/elastic"); do
  if [[ -d /proc/$p ]]; then
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1' && [[ $(cat "/proc/$p/comm") == mygpt-ddp ]] && victim=$p
  else
    ps -E -o command= -p "$p" 2>/dev/null | grep -q 'mygpt-ddp.* RANK=1 ' && victim=$p
  fi
done
killed_at=$(now)
[[ -n $victim ]] && kill -KILL "$victim"
step_at_kill=$(grep -oE '^step +[0-9]+' "$WORK/elastic.out" | tail -1 | grep -oE '[0-9]+')
wait_for "$WORK/elastic.out" '^resumed from ' && wait_for "$WORK/elastic.out" 'resumed from .*' &&
  for _ in $(seq 600); do
    [[ $(sed -n '/^resumed from /,$p' "$WORK/elastic.out" | grep -cE '^step +[0-9]+ \| loss') -gt 0 ]] && break
    sleep 0.05
  done
restart_seconds=$(seconds_since "$killed_at")
wait $pid
rc=$?
check "(1) elastic: rank 1 (pid ${victim:-none found}) killed at step ${step_at_kill:-?}; torchrun restarted the group, which finished (exit $rc)" \
  test -n "$victim" -a "$rc" -eq 0
echo "     | restart to first step after the kill: $restart_seconds s"
resumed=$(grep -c '^resumed from ' "$WORK/elastic.out")
check "(1) ... the restarted group resumed once from a checkpoint ($(grep -h '^resumed from ' "$WORK/elastic.out"))" test "$resumed" -eq 1
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 \
  "$(pair elastic uninterrupted "(1) elastic restart == uninterrupted run, bit for bit (losses of every step, final weights)")" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 1 ]] || fail "elastic comparison did not report"

# --- (4) bad launches ------------------------------------------------------------------------------
tiny=("${base[@]}" --batch-size 4 --steps 5 --log-every 1)
RANK=0 expect_bad_input rank_without_world "RANK is set but WORLD_SIZE is not" "$WORK/bad1" "${tiny[@]}" --out "$WORK/bad1"
OMPI_COMM_WORLD_SIZE=2 RANK=0 WORLD_SIZE=2 expect_bad_input mpi_and_torchrun "RANK .* and OMPI_COMM_WORLD_SIZE .* both set" \
  "$WORK/bad2" "${tiny[@]}" --out "$WORK/bad2"
RANK=0 WORLD_SIZE=2 MASTER_PORT=$(free_port) expect_bad_input no_master_addr "MASTER_ADDR is not set" "$WORK/bad3" \
  "${tiny[@]}" --out "$WORK/bad3"
RANK=1 WORLD_SIZE=2 MASTER_ADDR=no-such-host.invalid MASTER_PORT=29999 expect_bad_input unresolvable_host \
  "no-such-host.invalid.*does not resolve" "$WORK/bad4" "${tiny[@]}" --out "$WORK/bad4"
"$python" -c 'import socket, sys, time; s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' \
  >"$WORK/taken.port" &
holder=$!
for _ in $(seq 100); do [[ -s $WORK/taken.port ]] && break; sleep 0.1; done
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(cat "$WORK/taken.port") expect_bad_input port_taken \
  "MASTER_PORT=[0-9]+: the port is already in use" "$WORK/bad5" "${tiny[@]}" --out "$WORK/bad5"
kill $holder 2>/dev/null
RANK=0 WORLD_SIZE=2 expect_bad_input folder_not_writable "rendezvous file:/dev/null/x.*(cannot be created|not a directory|no such directory)" \
  "$WORK/bad6" "${tiny[@]}" --rendezvous file:/dev/null/x --out "$WORK/bad6"
expect_bad_input file_rendezvous_single "--rendezvous file:.* is for jobs started without MPI" "$WORK/bad7" \
  "${tiny[@]}" --rendezvous "file:$WORK/x" --out "$WORK/bad7"
PORT=$(free_port)
start=$(now)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT run never_joined "${tiny[@]}" --comm-timeout 3 --out "$WORK/bad8"
took=$(seconds_since "$start")
check "(4) a rank that never joins: exit 1 and one line within the timeout (exit $RC, $took s: $(cat "$WORK/never_joined.err"))" \
  test "$RC" -eq 1 -a "$(wc -l <"$WORK/never_joined.err")" -eq 1
check "(4) ... naming what is missing" grep -q "1 of 2 ranks joined the rendezvous at tcp://127.0.0.1:$PORT in 3 s (missing: rank 1)" \
  "$WORK/never_joined.err"
check "(4) ... and writing nothing into --out" test ! -e "$WORK/bad8"
PORT=$(free_port)
mixed_world() { if [[ $1 -eq 0 ]]; then torch_variables 0 2; else torch_variables 1 3; fi; }
env_job mixed_world 2 mixed_world "${tiny[@]}" --comm-timeout 20 --out "$WORK/bad9"
# Whichever rank joins first, both stop with the same line naming both sizes (rank 0 serves the store:
# it waits until rank 1 has read the line before it exits).
for err in "$WORK/mixed_world.err" "$WORK/mixed_world.r1.err"; do
  check "(4) WORLD_SIZE differing between ranks: exit 2, one line naming both ($(basename "$err"): $(cat "$err"))" \
    test "$RC" -eq 2 -a "$(wc -l <"$err")" -eq 1 -a -n "$(grep "WORLD_SIZE differs between the ranks of the rendezvous at .*: 2 on rank 0, 3 on rank 1" "$err")"
done
PORT=$(free_port)
rank1_twice() { if [[ $1 -eq 2 ]]; then torch_variables 1 3; else torch_variables "$1" 3; fi; }
env_job same_rank 3 rank1_twice "${tiny[@]}" --comm-timeout 5 --out "$WORK/bad10"
check "(4) two processes with RANK=1: one is refused, named ($(cat "$WORK/same_rank".r*.err | grep -m1 taken))" \
  grep -q "RANK=1 was already taken by" "$WORK/same_rank.r1.err" "$WORK/same_rank.r2.err"
PORT=$(free_port)
env_job config_same 2 torch_variables "${tiny[@]}" --out "$WORK/bad11" --lr 1e-3
check "(4) control: the same flags on both ranks train (exit $RC)" test "$RC" -eq 0
PORT=$(free_port)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT with_timeout 60 "$BIN" "${tiny[@]}" --out "$WORK/bad12" \
    --lr "$([[ $r -eq 0 ]] && echo 1e-3 || echo 2e-3)" >"$WORK/lr$r.out" 2>"$WORK/lr$r.err" &
done
wait
check "(4) ranks started with different --lr are refused by the configuration check" \
  grep -q "different configurations" "$WORK/lr0.err" "$WORK/lr1.err"
check "(4) ... before anything was written into --out" test -z "$(files_left_in "$WORK/bad12")"

# A rank that dies mid-run: the other fails at once with one line (no hang until the timeout).
PORT=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$BIN" "${long[@]}" --comm-timeout 120 --out "$WORK/dies" \
  >"$WORK/dies.out" 2>"$WORK/dies.err" &
rank0=$!
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$BIN" "${long[@]}" --comm-timeout 120 --out "$WORK/dies" \
  >/dev/null 2>&1 &
rank1=$!
wait_for "$WORK/dies.out" '^step +100 \| loss'
start=$(now)
kill -KILL $rank1
wait $rank0
rc=$?
took=$(seconds_since "$start")
check "(4) rank 1 killed mid-run: rank 0 exits 1 with one line in $took s ($(cat "$WORK/dies.err"))" \
  test "$rc" -eq 1 -a "$(grep -c 'error' "$WORK/dies.err")" -eq 1
check "(4) ... long before --comm-timeout 120" awk -v t="$took" 'BEGIN { exit !(t < 30) }'

# --- (5) a stop during an evaluation -------------------------------------------------------------
# SIGTERM while the ranks score HellaSwag (at step 0; the whole file takes about a minute here): every
# rank ends it at the next round of batches, together, and the run saves its checkpoint and exits 0,
# instead of finishing the evaluation (Slurm's grace before SIGKILL may be shorter).
GPT2=$(test_data_dir)/gpt2
HELLASWAG=$(test_data_dir)/hellaswag/hellaswag_val_full.txt
if [[ -f $GPT2/encoder.json && -f $HELLASWAG ]]; then
  for i in $(seq 1 200); do echo "And so the story of line $i goes on."; done >"$WORK/words.txt"
  "$torchrun" --standalone --nproc-per-node 2 --no-python "$BIN" train "$WORK/words.txt" --vocab "$GPT2" --preset small \
    --seq-len 32 --batch-size 4 --steps 50 --eval-every 0 --hellaswag "$HELLASWAG" --hellaswag-every 25 --threads 1 \
    --device cpu --out "$WORK/hs_stop" >"$WORK/hs_stop.out" 2>"$WORK/hs_stop.err" &
  pid=$!
  wait_for "$WORK/hs_stop.out" '^batch: '
  sleep 3
  start=$(now)
  kill -TERM $pid
  wait $pid
  took=$(seconds_since "$start")
  echo "(5) the run's last lines:"; tail -n 4 "$WORK/hs_stop.out" "$WORK/hs_stop.err" | grep -v '^ *File\|^ *\^' | tail -n 12
  # (torchrun itself exits 1 with a traceback when it is sent SIGTERM, whatever its ranks did.)
  check "(5) SIGTERM during HellaSwag on 2 ranks: cut short, stopped in $took s ($(grep -m1 'cut short' "$WORK/hs_stop.out"))" \
    bash -c "grep -q 'HellaSwag was cut short after [0-9]* examples' '$WORK/hs_stop.out' &&
             grep -q 'stopped early; continue with --resume auto' '$WORK/hs_stop.out'"
  check "(5) ... with a checkpoint at step 0" test -f "$WORK/hs_stop/ckpt_00000000.safetensors"
else
  skip "(5) a stop during HellaSwag (needs GPT-2's encoder.json and hellaswag_val_full.txt in the shared data)"
fi

finish
