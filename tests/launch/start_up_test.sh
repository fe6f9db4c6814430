#!/usr/bin/env bash
# What happens while a multi-rank training job starts up (issue 64):
#   (1) a stop (SIGTERM) that reaches rank 0 while it waits for rank 1 in the rendezvous: kept, not fatal
#       (it was exit 143: the handlers came after the data was read). The job trains one step, saves a
#       checkpoint and ends with exit 0, and --resume auto continues it;
#   (2) a refusal on rank 0 (--out held by a live run) is one line, rank 0's, under plain torchrun-style
#       variables and under mpirun; the other ranks end with its exit code and print nothing (rank 1 said
#       "Gloo broadcast failed ... Connection closed by peer" besides).
# usage: start_up_test.sh PATH/TO/mygpt-ddp PATH/TO/python
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
use_mpirun
make_work_dir start_up
RUN_TIMEOUT=120
unset OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_RANK PMI_SIZE RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR \
  MASTER_PORT TORCHELASTIC_RUN_ID SLURM_PROCID SLURM_STEP_NUM_TASKS SLURM_JOB_ID
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
tiny=(train builtin:sort --preset tiny --seq-len 32 --batch-size 4 --eval-every 0 --log-every 1 --threads 1 --device cpu)

# listening PORT: whether something on this host listens on TCP PORT (/proc/net/tcp: local address, state 0A).
listening() {
  awk -v port=":$(printf '%04X' "$1")" '$2 ~ port"$" && $4 == "0A" { found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# --- (1) a stop while rank 0 waits for rank 1 ----------------------------------------------------------
if [[ -r /proc/net/tcp ]]; then
  PORT=$(free_port)
  (export RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT
   exec "$BIN" "${tiny[@]}" --steps 50 --out "$WORK/stopped") >"$WORK/stopped.out" 2>"$WORK/stopped.err" &
  rank0=$!
  for _ in $(seq 300); do listening "$PORT" && break; sleep 0.1; done
  if listening "$PORT"; then
    kill -TERM "$rank0"
    sleep 0.5
    (export RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT
     with_timeout "$RUN_TIMEOUT" "$BIN" "${tiny[@]}" --steps 50 --out "$WORK/stopped") >"$WORK/stopped.r1.out" 2>"$WORK/stopped.r1.err"
    rc1=$?
    wait "$rank0"
    rc0=$?
    check "(1) SIGTERM to rank 0 in the rendezvous: every rank ends with exit 0 (rank 0: $rc0, rank 1: $rc1; $(tail -c 200 "$WORK/stopped.err"))" \
      test "$rc0" -eq 0 -a "$rc1" -eq 0
    check "(1) ... after one step, with a checkpoint: $(grep -m1 'stop requested' "$WORK/stopped.out")" \
      bash -c "grep -q '^stop requested: saving a checkpoint at step 1' '$WORK/stopped.out' && test -f '$WORK/stopped/ckpt_00000001.safetensors'"
    PORT=$(free_port)
    pids=()
    for r in 0 1; do
      (export RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT
       with_timeout "$RUN_TIMEOUT" "$BIN" "${tiny[@]}" --steps 3 --resume auto --out "$WORK/stopped") >"$WORK/resumed.r$r.out" 2>&1 &
      pids+=($!)
    done
    rc=0
    for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
    check "(1) ... and --resume auto continues it from step 1 (exit $rc)" \
      bash -c "[[ $rc -eq 0 ]] && grep -q '^resumed from .*ckpt_00000001.safetensors at step 1' '$WORK/resumed.r0.out'"
  else
    kill -9 "$rank0" 2>/dev/null
    fail "(1) rank 0 never listened on its port $PORT" "$(tail -c 300 "$WORK/stopped.err")"
  fi
else
  skip "(1) a stop in the rendezvous (no /proc/net/tcp here to see rank 0 listen)"
fi

# --- (2) a refusal on rank 0: one line ---------------------------------------------------------------
"$BIN" "${tiny[@]}" --steps 1000000 --checkpoint-every 0 --out "$WORK/busy" >"$WORK/holder.out" 2>"$WORK/holder.err" &
holder=$!
trap 'kill -9 $holder 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$WORK"' EXIT
for _ in $(seq 300); do [[ -f $WORK/busy/run.lock ]] && grep -q '^step' "$WORK/holder.out" && break; sleep 0.1; done
# one_line NAME RC: the job NAME (its .err files) refused with exit 2 and one line, rank 0's, naming --out.
one_line() {
  local name=$1 rc=$2 lines
  lines=$(cat "$WORK/$name"*.err | grep -c 'mygpt-ddp: error')
  check "(2) $name: exit 2 (got $rc)" test "$rc" -eq 2
  check "(2) $name: one error line of $lines: $(cat "$WORK/$name"*.err | grep -m1 'mygpt-ddp: error')" \
    bash -c "[[ $lines -eq 1 ]] && cat '$WORK/$name'*.err | grep -q \"^rank 0: mygpt-ddp: error: --out '$WORK/busy' is in use by another run\""
  check "(2) $name: no rank names the lost connection" bash -c "! cat '$WORK/$name'*.err | grep -qiE 'gloo|connection closed|broadcast failed'"
}
PORT=$(free_port)
pids=()
for r in 0 1; do
  (export RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT
   with_timeout "$RUN_TIMEOUT" "$BIN" "${tiny[@]}" --steps 5 --out "$WORK/busy") >"$WORK/refused_env.r$r.out" 2>"$WORK/refused_env.r$r.err" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || { r=$?; [[ $rc -eq 0 ]] && rc=$r; }; done
one_line refused_env "$rc"
if [[ ${#MPIRUN[@]} -gt 0 ]]; then
  run_cmd refused_mpi "${MPIRUN[@]}" -np 2 "$BIN" "${tiny[@]}" --steps 5 --out "$WORK/busy"
  one_line refused_mpi "$RC"
else
  skip "(2) under mpirun (no mpirun here)"
fi
check "(2) the holder is still training" kill -0 "$holder"
finish
