#!/usr/bin/env bash
# One run per output folder, with two real processes (issue 19): a second `train --resume auto` into the
# --out of a run that is still going is refused within seconds, naming the holder, and the first run's
# files stay intact; the claim is released when the run stops early, after an error exit, and is taken
# over (with a note) from a run killed outright. Also `prepare` into a folder that is being prepared, and
# `export --overwrite` into a live run's folder (issue 26).
# Usage: output_claim_test.sh MYGPT_DDP
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
make_work_dir output_claim
cd "$WORK" || exit 1
RUN_TIMEOUT=60
LONG=(builtin:sort --preset tiny --batch-size 2 --seq-len 16 --eval-every 0 --device cpu --threads 1
      --checkpoint-every 20 --log-every 1)

# wait_for FILE SECONDS: until FILE exists (returns non-zero when it never does).
wait_for() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do [[ -e $1 ]] && return 0; sleep 0.1; done
  return 1
}
first_pid=""
cleanup() { [[ -n $first_pid ]] && kill -9 "$first_pid" 2>/dev/null; }
trap 'cleanup; [[ -n ${KEEP:-} ]] || rm -rf "$WORK"' EXIT

# --- a live run: a second one is refused and the first one's files stay whole --------------------
"$BIN" train "${LONG[@]}" --steps 1000000 --out busy >first.out 2>first.err &
first_pid=$!
if ! wait_for busy/ckpt_00000020.safetensors 60; then
  fail "first run wrote a checkpoint" "$(tail -c 300 first.err)"
  finish
fi
check "the run holds busy/run.lock" test -f busy/run.lock
metrics_inode=$(file_inode busy/metrics.jsonl)
rows_before=$(wc -l <busy/metrics.jsonl)
started=$SECONDS
if expect_bad second "--out 'busy' is in use by another run \(host $(hostname), pid $first_pid, since [0-9T:-]+Z" \
     train "${LONG[@]}" --steps 1000000 --resume auto --out busy; then
  pass "a second train into a busy --out: exit 2, $(cat second.err)"
fi
check "refused within seconds ($((SECONDS - started)) s)" test $((SECONDS - started)) -le 10
check "the second run printed nothing of a run" test ! -s second.out
check "the first run's metrics file is the same file" test "$(file_inode busy/metrics.jsonl)" = "$metrics_inode"
sleep 1
rows_after=$(wc -l <busy/metrics.jsonl)
check "the first run's metrics keep growing ($rows_before -> $rows_after rows)" test "$rows_after" -gt "$rows_before"
check "every metrics row is whole JSON" python3 -c "import json,sys; [json.loads(l) for l in open('busy/metrics.jsonl')]"
expect_bad overwrite "in use by another run" train "${LONG[@]}" --steps 1000000 --overwrite --out busy &&
  pass "--overwrite into a busy --out is refused too"
expect_bad export_busy "--out 'busy' is in use by another run \(host $(hostname), pid $first_pid" \
     export --checkpoint busy/ckpt_00000020.safetensors --out busy --overwrite &&
  pass "export --overwrite into a live run's --out is refused: $(cat export_busy.err)"
check "the refused export wrote no model file there" test ! -e busy/config.json -a ! -e busy/model.safetensors
check "the first run's checkpoints are all still there" test -f busy/ckpt_00000020.safetensors

# --- an early stop (SIGTERM) releases the claim -----------------------------------------------------
kill -TERM "$first_pid"
wait "$first_pid"
rc=$?
first_pid=""
check "the first run stopped early with exit 0 (got $rc)" test "$rc" -eq 0
check "the claim is released after an early stop" test ! -e busy/run.lock
check "no claim temporaries are left" test -z "$(find busy -name '.run.lock*')"

# --- an error exit releases the claim ----------------------------------------------------------------
expect_bad bad_resume "--resume busy/ckpt_[0-9]+\.safetensors: .*beyond --steps" train "${LONG[@]}" --steps 1 --resume auto --out busy &&
  pass "an error exit: $(cat bad_resume.err)"
check "the claim is released after an error exit" test ! -e busy/run.lock

# --- a run killed outright: its claim is taken over, with a note --------------------------------------
"$BIN" train "${LONG[@]}" --steps 1000000 --resume auto --out busy >killed.out 2>killed.err &
first_pid=$!
wait_for busy/run.lock 30 && sleep 1
kill -9 "$first_pid"
wait "$first_pid" 2>/dev/null
first_pid=""
check "a killed run leaves its claim" test -f busy/run.lock
latest=$(find busy -name 'ckpt_*.safetensors' | sort | tail -n 1)
latest_step=$((10#$(basename "$latest" .safetensors | tr -dc 0-9)))
if expect_ok takeover train "${LONG[@]}" --steps $((latest_step + 2)) --resume auto --out busy; then
  if grep -q "took over --out 'busy' from a run that is gone" takeover.out; then
    pass "the dead run's claim was taken over: $(grep 'took over' takeover.out)"
  else
    fail "takeover note" "$(head -c 300 takeover.out)"
  fi
fi
check "released at the end of a normal run" test ! -e busy/run.lock

# --- a live pid that is not the holder (issue 40): PID 1 of a restarted container, a pid reused after a
# reboot. The claim names the process by its start (the host's boot id and the start time in clock ticks,
# /proc/PID/stat's field 22); PID 1 is alive here, and is never the holder of a planted claim.
boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
start_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $20 }'; }
# plant_claim FOLDER PID SINCE [PROCESS]: a claim as a run left it, its heartbeat an hour old.
plant_claim() {
  mkdir -p "$1"
  printf 'host=%s\npid=%s\nsince=%s\ntoken=0123456789abcdef\n%s' "$(hostname)" "$2" "$3" "${4:+process=$4
}" >"$1/run.lock"
  touch -d '1 hour ago' "$1/run.lock"
}
# takeover NAME FOLDER REGEX: a run into FOLDER takes the claim over, its note matching REGEX.
takeover() {
  if expect_ok "$1" train "${LONG[@]}" --steps 2 --out "$2"; then
    if grep -qE "took over --out '$2' from a run that is gone .*$3" "$1.out"; then
      pass "$1: $(grep 'took over' "$1.out")"
    else
      fail "$1: takeover note" "$(head -c 400 "$1.out")"
    fi
  fi
}
if [[ -n $boot_id && -r /proc/1/stat ]]; then
  # A claim from before claims named their process (pid only): PID 1 started after it was written.
  plant_claim pid1_old 1 2000-01-01T00:00:00Z
  takeover pid1_old pid1_old "pid 1 is now another process, started at .*, after the claim"
  # This boot, pid 1, but another start than the claim's.
  plant_claim pid1_restarted 1 "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$boot_id/$(($(start_ticks 1) + 12345))"
  takeover pid1_restarted pid1_restarted "pid 1 is now another process, started after the holder's"
  # Another boot of this host: every pid is reused.
  plant_claim rebooted 1 "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "00000000-0000-0000-0000-000000000000/$(start_ticks 1)"
  takeover rebooted rebooted "the host has restarted since"
  # The holder itself: alive, the same process, an old heartbeat (stopped with SIGSTOP, suspended): refused.
  sleep 300 &
  holder=$!
  plant_claim held "$holder" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$boot_id/$(start_ticks "$holder")"
  expect_bad held "--out 'held' is in use by another run \(host $(hostname), pid $holder" train "${LONG[@]}" --steps 2 \
    --out held && pass "a live holder with an old heartbeat keeps its claim: $(cat held.err)"
  kill "$holder"
else
  skip "pid reuse: no /proc boot id here"
fi

# --- prepare: one process per shard folder ---------------------------------------------------------------
python3 -c "print('to be or not to be, that is the question\n' * 20000)" >text.txt
mkdir -p shards
printf 'host=%s\npid=%s\nsince=%s\ntoken=x\n' "$(hostname)" "$$" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >shards/run.lock
if expect_bad prepare_busy "--out 'shards' is in use by another run \(host $(hostname), pid $$" \
     prepare --input text.txt --out shards --tokenizer char --quiet; then
  pass "prepare into a busy folder: $(cat prepare_busy.err)"
fi
check "the busy shard folder got no shard" test -z "$(find shards -name '*.bin')"
finish
