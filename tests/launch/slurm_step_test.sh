#!/usr/bin/env bash
# The binary as srun's tasks see it without MPI (issue 59), each task started by hand with the variables
# Slurm 22.05 gives a task of a step (src/common/env.c: env_array_for_step, setup_env), on CPU over Gloo:
#   (1) the step's layout, not the allocation's: salloc --ntasks-per-node=1 then srun -n 2 --overcommit
#       trains as one 2-rank job; --ntasks-per-node=2 then srun -n 1 trains as one process;
#   (2) a rank refused for its own variables leaves its line for the others: every rank ends within
#       seconds (not --comm-timeout) with one line, whether the refused rank is rank 1 or rank 0;
#   (3) two jobs whose derived ports coincide: the second ends at once with "port N in use, perhaps by
#       another job; set MASTER_PORT" on both ranks (its rank 1 was already connected to the first job's
#       store), and the first job trains on undisturbed;
#   (4) a run killed with SIGKILL leaves its claim (run.lock); the requeued start (SLURM_RESTART_COUNT
#       one higher) takes it over, even when the killed start ran on another node (its claim's heartbeat
#       still fresh), and resumes from the last checkpoint.
# usage: slurm_step_test.sh PATH/TO/mygpt-ddp PATH/TO/python
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
make_work_dir slurm_step
unset OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_RANK PMI_SIZE RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR \
  MASTER_PORT TORCHELASTIC_RUN_ID "${!SLURM_@}"
RUN_TIMEOUT=120

now() { now_seconds; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 600); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

tiny=(train builtin:sort --preset tiny --seq-len 32 --batch-size 4 --lr 1e-3 --warmup-steps 2 --seed 4242 --eval-every 0
      --threads 1 --device cpu --data-order sequential --log-every 1)

# step_task PROCID: what srun gives task PROCID of a step of STEP_TASKS tasks on one node (localhost),
# in an allocation made with --ntasks-per-node=ALLOC_PER_NODE, job JOB_ID step STEP_ID; EXTRA appended.
step_task() {
  echo "SLURM_JOB_ID=$JOB_ID SLURM_JOBID=$JOB_ID SLURM_STEP_ID=${STEP_ID:-0} SLURM_STEPID=${STEP_ID:-0}"
  echo "SLURM_CLUSTER_NAME=test SLURM_JOB_NODELIST=localhost SLURM_NODELIST=localhost SLURM_STEP_NODELIST=localhost"
  echo "SLURM_JOB_NUM_NODES=1 SLURM_NNODES=1 SLURM_STEP_NUM_NODES=1 SLURM_NTASKS_PER_NODE=$ALLOC_PER_NODE"
  echo "SLURM_STEP_NUM_TASKS=$STEP_TASKS SLURM_STEP_TASKS_PER_NODE=$STEP_TASKS SLURM_NTASKS=$STEP_TASKS"
  echo "SLURM_TASKS_PER_NODE=$STEP_TASKS SLURM_PROCID=$1 SLURM_LOCALID=$1 SLURM_NODEID=0 SLURM_CPUS_ON_NODE=2"
  echo "SLURM_RESTART_COUNT=${RESTART:-0} ${EXTRA:-}"
}
# step NAME ARGS...: the STEP_TASKS tasks of a step, started together; rank r's output in NAME.out/.err
# (rank 0) or NAME.rR.out/.err; RC is the first non-zero exit code. TASK_VARS (a function of the rank)
# may change a task's variables.
step() {
  local name=$1
  shift
  local pids=() r out
  for ((r = 0; r < STEP_TASKS; ++r)); do
    out=$WORK/$name; [[ $r -gt 0 ]] && out=$WORK/$name.r$r
    # shellcheck disable=SC2046  # one word per variable
    (export $(step_task "$r") $(${TASK_VARS:-true} "$r"); with_timeout "$RUN_TIMEOUT" "$BIN" "$@") >"$out.out" 2>"$out.err" &
    pids+=($!)
  done
  RC=0
  for pid in "${pids[@]}"; do wait "$pid" || { local rc=$?; [[ $RC -eq 0 ]] && RC=$rc; }; done
}

# --- (1) the step's layout ------------------------------------------------------------------------------
JOB_ID=$((RANDOM + 1000)) ALLOC_PER_NODE=1 STEP_TASKS=2 step overcommit "${tiny[@]}" --steps 3 --out "$WORK/overcommit"
check "(1) --ntasks-per-node=1, srun -n 2 --overcommit: one job of 2 ranks (exit $RC: $(cat "$WORK/overcommit"*.err | head -c 300))" \
  bash -c "[[ $RC -eq 0 ]] && grep -q '^world: 2 rank(s) on 1 node(s), 2 per node .*| launcher slurm' '$WORK/overcommit.out'"
JOB_ID=$((RANDOM + 1000)) ALLOC_PER_NODE=2 STEP_TASKS=1 step one_task "${tiny[@]}" --steps 3 --out "$WORK/one_task"
check "(1) --ntasks-per-node=2, srun -n 1: one process (exit $RC: $(head -c 300 "$WORK/one_task.err"))" \
  bash -c "[[ $RC -eq 0 ]] && grep -q '^world: 1 rank(s) .*| launcher none' '$WORK/one_task.out'"

# --- (2) a refused rank leaves its line -------------------------------------------------------------------
# refused NAME RANK VARIABLE=VALUE: a 2-task step whose task RANK has VARIABLE wrong; both end quickly.
refused() {
  local name=$1 bad_rank=$2 bad=$3 start took
  bad_task() { [[ $1 -eq $bad_rank ]] && echo "$bad"; }
  start=$(now)
  JOB_ID=$((RANDOM + 1000)) ALLOC_PER_NODE=2 STEP_TASKS=2 TASK_VARS=bad_task step "$name" "${tiny[@]}" --steps 3 \
    --comm-timeout 60 --out "$WORK/$name"
  took=$(seconds_since "$start")
  local good=$WORK/$name.err lines
  [[ $bad_rank -eq 0 ]] && good=$WORK/$name.r1.err
  lines=$(cat "$WORK/$name.err" "$WORK/$name.r1.err" | wc -l)
  if [[ $RC -eq 2 ]] && awk -v t="$took" 'BEGIN { exit !(t < 20) }' && [[ $lines -eq 2 ]] &&
     grep -q "error: rank $bad_rank was refused: " "$good"; then
    pass "(2) $bad on rank $bad_rank: both ranks out in $took s (--comm-timeout 60), one line each ($(cat "$good"))"
  else
    fail "(2) $bad on rank $bad_rank" "exit $RC in $took s: $(cat "$WORK/$name.err" "$WORK/$name.r1.err" | head -c 500)"
  fi
  check "(2) ... and nothing written into --out" test -z "$(files_left_in "$WORK/$name")"
}
refused refused_rank1 1 SLURM_LOCALID=5
refused refused_rank0 0 SLURM_NODEID=3

# --- (3) two jobs on one derived port -------------------------------------------------------------------
# slurm_port(J, 0) == slurm_port(J + 7, 48): the nearest pairs that share a port (launch_environment.cpp).
first_job=$((RANDOM + 1000))
long_ranks=()
for r in 0 1; do
  out=$WORK/first_job; [[ $r -gt 0 ]] && out=$WORK/first_job.r$r
  # shellcheck disable=SC2046  # one word per variable
  (export $(JOB_ID=$first_job ALLOC_PER_NODE=2 STEP_TASKS=2 step_task "$r"); exec "$BIN" "${tiny[@]}" --steps 1000000 \
    --out "$WORK/first_job") >"$out.out" 2>"$out.err" &
  long_ranks+=($!)
done
if wait_for "$WORK/first_job.out" '^step +20 \|'; then
  start=$(now)
  JOB_ID=$((first_job + 7)) STEP_ID=48 ALLOC_PER_NODE=2 STEP_TASKS=2 step second_job "${tiny[@]}" --steps 3 \
    --comm-timeout 60 --out "$WORK/second_job"
  took=$(seconds_since "$start")
  port=$(grep -o 'rendezvous: tcp://localhost:[0-9]*' "$WORK/first_job.out" | grep -o '[0-9]*$')
  for err in "$WORK/second_job.err" "$WORK/second_job.r1.err"; do
    check "(3) the second job ends at once ($took s), $(basename "$err"): $(cat "$err")" \
      bash -c "[[ $RC -eq 2 ]] && [[ \$(wc -l <'$err') -eq 1 ]] &&
               grep -q 'port $port in use, perhaps by another job; set MASTER_PORT' '$err' && ! grep -q SLURM_PROCID '$err'"
  done
  check "(3) ... within seconds" awk -v t="$took" 'BEGIN { exit !(t < 20) }'
else
  fail "(3) the first job did not start" "$(head -c 300 "$WORK/first_job.err")"
fi
# The first job, asked to stop: both ranks still in step, a checkpoint, exit 0.
kill -TERM "${long_ranks[@]}"
rc=0
for pid in "${long_ranks[@]}"; do wait "$pid" || rc=$?; done
check "(3) ... and the first job trained on undisturbed, then stopped with a checkpoint (exit $rc)" \
  bash -c "[[ $rc -eq 0 ]] && grep -q '^stopped early; continue with --resume auto' '$WORK/first_job.out'"

# --- (4) a killed run's claim, taken over by the requeued start --------------------------------------------
# killed NAME: a one-task step (a plain process in a Slurm job) killed with SIGKILL after its checkpoint
# at step 5; prints the step it reached.
killed() {
  local name=$1
  (export $(step_task 0); exec "$BIN" "${tiny[@]}" --steps 100000 --checkpoint-every 5 --out "$WORK/$name") \
    >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$!
  for _ in $(seq 600); do [[ -f $WORK/$name/ckpt_00000005.safetensors ]] && break; sleep 0.05; done
  kill -KILL $pid
  wait $pid 2>/dev/null
}
JOB_ID=$((RANDOM + 1000))
for where in this other; do
  ALLOC_PER_NODE=1 STEP_TASKS=1 RESTART=0 killed "killed_$where"
  check "(4) SIGKILL left the claim in --out ($where node)" test -f "$WORK/killed_$where/run.lock"
  # The killed start ran on another node: its claim names that host, and its heartbeat is fresh.
  if [[ $where == other ]]; then
    sed 's/^host=.*/host=node-of-the-killed-start/' "$WORK/killed_$where/run.lock" >"$WORK/claim.tmp"
    mv "$WORK/claim.tmp" "$WORK/killed_$where/run.lock"
  fi
  touch "$WORK/killed_$where/run.lock"
  at=$(ls "$WORK/killed_$where" | sed -n 's/^ckpt_0*\([0-9][0-9]*\)\.safetensors$/\1/p' | sort -n | tail -1)
  ALLOC_PER_NODE=1 STEP_TASKS=1 RESTART=1 step "requeued_$where" "${tiny[@]}" --steps $((at + 3)) --checkpoint-every 5 \
    --resume auto --out "$WORK/killed_$where"
  check "(4) the requeued start took the claim over ($where node): $(grep -m1 'took over' "$WORK/requeued_$where.out")" \
    bash -c "[[ $RC -eq 0 ]] && grep -q '^note: took over --out .* from a run that is gone' '$WORK/requeued_$where.out'"
  check "(4) ... and resumed from step $at (exit $RC: $(head -c 200 "$WORK/requeued_$where.err"))" \
    grep -q "^resumed from .*ckpt_0*$at.safetensors at step $at" "$WORK/requeued_$where.out"
done
check "(4) a claim from another node is known as an earlier start of the same job" \
  grep -q "an earlier start of slurm job $JOB_ID on cluster test (restart 0; this is restart 1)" "$WORK/requeued_other.out"
finish
