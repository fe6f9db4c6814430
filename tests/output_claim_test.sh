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

# --- prepare: one process per shard folder ---------------------------------------------------------------
python3 -c "print('to be or not to be, that is the question\n' * 20000)" >text.txt
mkdir -p shards
printf 'host=%s\npid=%s\nsince=2026-01-01T00:00:00Z\ntoken=x\n' "$(hostname)" "$$" >shards/run.lock
if expect_bad prepare_busy "--out 'shards' is in use by another run \(host $(hostname), pid $$" \
     prepare --input text.txt --out shards --tokenizer char --quiet; then
  pass "prepare into a busy folder: $(cat prepare_busy.err)"
fi
check "the busy shard folder got no shard" test -z "$(find shards -name '*.bin')"
finish
