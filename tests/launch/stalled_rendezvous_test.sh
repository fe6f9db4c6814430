#!/usr/bin/env bash
# The rendezvous's waits end by --comm-timeout with one line, whatever sits on the other side:
#   (1) a silent listener on MASTER_PORT (accepts TCP, never answers: another program's port, a stopped
#       rank 0): c10d's ping after connecting has no timeout of its own, so this hung for good before;
#   (2) nothing listening: c10d retries, logging a warning with a stack trace per try; our line comes
#       alone, and --verbose brings c10d's warnings back;
#   (3) --rendezvous file:DIR with a DIR that does not exist: refused at once, and nothing is created.
# usage: stalled_rendezvous_test.sh PATH/TO/mygpt-ddp PATH/TO/python
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
make_work_dir stalled_rendezvous
RUN_TIMEOUT=60  # a case still running then is the hang this test is about
unset OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_RANK PMI_SIZE RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR \
  MASTER_PORT TORCHELASTIC_RUN_ID SLURM_PROCID SLURM_STEP_NUM_TASKS SLURM_JOB_ID TORCH_CPP_LOG_LEVEL

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
tiny=(train builtin:sort --preset tiny --seq-len 32 --batch-size 4 --steps 3 --eval-every 0 --threads 1 --device cpu)
# Start-up (LibTorch's libraries) comes on top of the timeout; a hang is what the limit catches.
TIMEOUT=3
SLACK=15

# --- (1) a silent listener ---------------------------------------------------------------------------
"$python" -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])  # accepted, never answered
' >"$WORK/silent.port" &
listener=$!
for _ in $(seq 100); do [[ -s $WORK/silent.port ]] && break; sleep 0.1; done
PORT=$(cat "$WORK/silent.port")
start=$(now)
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT run silent "${tiny[@]}" --comm-timeout $TIMEOUT --out "$WORK/silent"
took=$(seconds_since "$start")
kill "$listener" 2>/dev/null
check "(1) a silent listener on MASTER_PORT: exit 1 with one line ($took s, exit $RC: $(head -c 400 "$WORK/silent.err"))" \
  test "$RC" -eq 1 -a "$(wc -l <"$WORK/silent.err")" -eq 1
check "(1) ... within --comm-timeout $TIMEOUT s and start-up" awk -v t="$took" -v l=$((TIMEOUT + SLACK)) 'BEGIN { exit !(t < l) }'
check "(1) ... naming the address and what was waited for" \
  grep -q "rendezvous at tcp://127.0.0.1:$PORT (from MASTER_ADDR.*) sent no answer to c10d's connect and ping.*within --comm-timeout $TIMEOUT s" \
  "$WORK/silent.err"
check "(1) ... and leaving no --out behind" test ! -e "$WORK/silent"

# --- (2) nothing listening: our line alone, c10d's retries with --verbose ------------------------------
PORT=$(free_port)
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT run refused "${tiny[@]}" --comm-timeout $TIMEOUT --out "$WORK/refused"
check "(2) nothing on MASTER_PORT: exit 1 and one stderr line, no c10d warnings (exit $RC, $(wc -l <"$WORK/refused.err") line(s): $(head -c 300 "$WORK/refused.err"))" \
  test "$RC" -eq 1 -a "$(wc -l <"$WORK/refused.err")" -eq 1
check "(2) ... naming the address" grep -q "rendezvous at tcp://127.0.0.1:$PORT" "$WORK/refused.err"
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT run refused_verbose "${tiny[@]}" --comm-timeout $TIMEOUT \
  --verbose --out "$WORK/refused"
check "(2) ... --verbose keeps c10d's own retry warnings ($(grep -c '\[c10d\]' "$WORK/refused_verbose.err") of them)" \
  grep -q '\[c10d\]' "$WORK/refused_verbose.err"
check "(2) ... and still ends with our line" bash -c "tail -n 1 '$WORK/refused_verbose.err' | grep -q 'rendezvous at tcp://127.0.0.1:$PORT'"

# --- (3) a rendezvous folder that does not exist ---------------------------------------------------------
RANK=0 WORLD_SIZE=2 expect_bad_input missing_folder "--rendezvous file:$WORK/no/such/dir: no such directory" "$WORK/bad" \
  "${tiny[@]}" --rendezvous "file:$WORK/no/such/dir" --comm-timeout $TIMEOUT --out "$WORK/bad"
check "(3) ... and nothing of that path is created" test ! -e "$WORK/no"

finish
