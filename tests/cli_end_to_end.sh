#!/usr/bin/env bash
# End-to-end tests of the mygpt-ddp binary: exit codes and one-line messages for bad input, help,
# config files, a real training run whose loss must fall, and reproducible generation.
#
#   bash cli_end_to_end.sh <path-to-mygpt-ddp> <shared-data-dir>
#
# Prints one line per check and a final "N passed, M failed, K skipped"; exits non-zero unless every
# check passed (tests/lib.sh).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

use_binary "${1:-}"
DATA_DIR=$(test_data_dir "${2:-}")
make_work_dir e2e
RUN_TIMEOUT=0  # the real training run below takes as long as the machine needs

# Small settings that would finish in a second if a bad input were wrongly accepted.
SMALL=(--preset tiny --batch-size 2 --seq-len 16 --eval-every 0 --threads 1 --device cpu)

HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then HAVE_GPU=1; fi

# ------------------------------------------------------------------------------------------------
echo "== bad input: exit code 2 and one line naming the problem"

printf 'First Citizen:\nBefore we proceed any further, hear me speak.\n' >"$WORK/short.txt"
: >"$WORK/empty.txt"
mkdir -p "$WORK/a_directory"

expect_bad_input "train: missing data file" "missing_corpus\.txt.*(exist|found)" "$WORK/o_missing" \
  train "$WORK/missing_corpus.txt" "${SMALL[@]}" --steps 2 --out "$WORK/o_missing"
expect_bad_input "train: empty data file" "empty\.txt.*empty" "$WORK/o_empty" \
  train "$WORK/empty.txt" "${SMALL[@]}" --steps 2 --out "$WORK/o_empty"
expect_bad_input "train: directory as data" "a_directory.*directory" "$WORK/o_dir" \
  train "$WORK/a_directory" "${SMALL[@]}" --steps 2 --out "$WORK/o_dir"
expect_bad_input "train: corpus shorter than one batch" "fewer than one batch" "$WORK/o_short" \
  train "$WORK/short.txt" --preset tiny --batch-size 16 --seq-len 16 --steps 2 --threads 1 --device cpu \
  --out "$WORK/o_short"
expect_bad_input "train: --n-head 3 with --n-embd 32" "n_head.*3.*n_embd.*32|n-head" "$WORK/o_heads" \
  train builtin:sort "${SMALL[@]}" --n-head 3 --n-embd 32 --steps 2 --out "$WORK/o_heads"
expect_bad_input "train: --steps 0" "--steps.*0" "$WORK/o_steps" \
  train builtin:sort "${SMALL[@]}" --steps 0 --out "$WORK/o_steps"
expect_bad_input "train: --batch-size -1" "--batch-size.*-1" "$WORK/o_batch" \
  train builtin:sort --preset tiny --seq-len 16 --eval-every 0 --threads 1 --device cpu --steps 2 \
  --batch-size -1 --out "$WORK/o_batch"
expect_bad_input "train: --seq-len above the block size" "--seq-len.*64.*32" "$WORK/o_seqlen" \
  train builtin:sort --preset tiny --batch-size 2 --eval-every 0 --threads 1 --device cpu --steps 2 \
  --seq-len 64 --out "$WORK/o_seqlen"
expect_bad_input "train: --preset nope" "preset.*nope" "$WORK/o_preset" \
  train builtin:sort --batch-size 2 --seq-len 16 --eval-every 0 --threads 1 --device cpu --steps 2 \
  --preset nope --out "$WORK/o_preset"
expect_bad_input "train: --device nope" "device.*nope" "$WORK/o_device" \
  train builtin:sort --preset tiny --batch-size 2 --seq-len 16 --eval-every 0 --threads 1 --steps 2 \
  --device nope --out "$WORK/o_device"
if [[ $HAVE_GPU -eq 0 ]]; then
  expect_bad_input "train: --device cuda without a GPU" "cuda" "$WORK/o_cuda" \
    train builtin:sort --preset tiny --batch-size 2 --seq-len 16 --eval-every 0 --threads 1 --steps 2 \
    --device cuda --out "$WORK/o_cuda"
else
  skip "train: --device cuda without a GPU (this machine has a GPU)"
fi
expect_bad_input "train: unknown flag" "no-such-flag" "$WORK/o_flag" \
  train builtin:sort "${SMALL[@]}" --steps 2 --no-such-flag 3 --out "$WORK/o_flag"
expect_bad_input "train: unknown builtin dataset" "builtin:nope" "$WORK/o_builtin" \
  train builtin:nope "${SMALL[@]}" --steps 2 --out "$WORK/o_builtin"
expect_bad_input "unknown command" "frobnicate" "" frobnicate --steps 2
expect_bad_input "train: missing config file" "no_such_config\.cfg" "$WORK/o_cfgmissing" \
  train builtin:sort "${SMALL[@]}" --steps 2 --config "$WORK/no_such_config.cfg" --out "$WORK/o_cfgmissing"

# A real (tiny) checkpoint for the generate checks.
run tiny_train train builtin:sort "${SMALL[@]}" --steps 2 --out "$WORK/tiny"
TINY_CKPT="$WORK/tiny/ckpt_00000002.safetensors"
if [[ $RC -eq 0 && -f $TINY_CKPT && -z $(find "$WORK/tiny" -name "*.pt") ]]; then
  pass "train: a 2-step tiny run writes $(basename "$TINY_CKPT")"
else
  fail "train: a 2-step tiny run" "exit code $RC, $(ls "$WORK/tiny" 2>&1 | tr '\n' ' '); stderr: $(head -c 300 "$WORK/tiny_train.err")"
fi
size=$(wc -c <"$TINY_CKPT" 2>/dev/null || echo 0)
head -c $((size / 2)) "$TINY_CKPT" >"$WORK/truncated.safetensors"
head -c 4096 /dev/urandom >"$WORK/random_bytes.safetensors"
mkdir -p "$WORK/empty_ckpt_dir"

expect_bad_input "generate: missing checkpoint" "absent_ckpt\.safetensors" "" \
  generate --checkpoint "$WORK/absent_ckpt.safetensors" --device cpu
expect_bad_input "generate: truncated checkpoint" "truncated\.safetensors" "" \
  generate --checkpoint "$WORK/truncated.safetensors" --device cpu
expect_bad_input "generate: random bytes as checkpoint" "random_bytes\.safetensors" "" \
  generate --checkpoint "$WORK/random_bytes.safetensors" --device cpu
expect_bad_input "generate: directory without checkpoints" "empty_ckpt_dir.*checkpoint" "" \
  generate --checkpoint "$WORK/empty_ckpt_dir" --device cpu
expect_bad_input "generate: prompt character outside the vocabulary" "'x'.*vocabulary" "" \
  generate --checkpoint "$TINY_CKPT" --device cpu --prompt "12x4=" --max-new-tokens 5
expect_bad_input "generate: --checkpoint missing" "checkpoint" "" generate --device cpu
expect_bad_input "eval: missing checkpoint" "absent_ckpt\.safetensors" "" \
  eval --checkpoint "$WORK/absent_ckpt.safetensors" --task builtin:sort --device cpu
run tiny_eval eval --checkpoint "$WORK/tiny" --task builtin:sort --examples 20 --device cpu
if [[ $RC -eq 0 ]] && grep -q "held-out accuracy" "$WORK/tiny_eval.out"; then
  pass "eval: builtin:sort accuracy of the tiny checkpoint: $(grep "held-out accuracy" "$WORK/tiny_eval.out")"
else
  fail "eval: builtin:sort accuracy of the tiny checkpoint" "exit code $RC; $(head -c 300 "$WORK/tiny_eval.err")"
fi

# Standard output that cannot be written (a full disk; Linux's /dev/full) is one line and exit 2, not a
# run that ends with exit 0 and its text lost.
if [[ -w /dev/full ]]; then
  for cmd in "generate --prompt 12 --max-new-tokens 5" "eval --task builtin:sort --examples 4"; do
    name=full_stdout_${cmd%% *}
    # shellcheck disable=SC2086  # the command's words
    "$BIN" $cmd --checkpoint "$TINY_CKPT" --device cpu >/dev/full 2>"$WORK/$name.err"
    RC=$?
    if [[ $RC -eq 2 && $(wc -l <"$WORK/$name.err") -eq 1 ]] && grep -q "cannot write standard output: No space left on device" "$WORK/$name.err"; then
      pass "${cmd%% *} into a full stdout: exit 2, $(cat "$WORK/$name.err")"
    else
      fail "${cmd%% *} into a full stdout" "exit $RC: $(head -c 300 "$WORK/$name.err")"
    fi
  done
else
  skip "a full standard output (this system has no /dev/full)"
fi

# A checkpoint under the name of builds before .safetensors (ckpt_<step>.pt, the same bytes) is read by
# every command that takes one, as a file or as the newest in a folder.
OLD_CKPT=$WORK/old_name/ckpt_00000002.pt
mkdir -p "$WORK/old_name" && cp "$TINY_CKPT" "$OLD_CKPT"
SAMPLE=(--device cpu --prompt "31" --max-new-tokens 8 --seed 3)
run new_name_generate generate --checkpoint "$TINY_CKPT" "${SAMPLE[@]}"
run old_name_generate generate --checkpoint "$OLD_CKPT" "${SAMPLE[@]}"
if [[ $RC -eq 0 ]] && grep -qF "model: checkpoint $OLD_CKPT (step 2)" "$WORK/old_name_generate.out" &&
   cmp -s <(grep -v '^model:' "$WORK/old_name_generate.out") <(grep -v '^model:' "$WORK/new_name_generate.out"); then
  pass "generate --checkpoint ckpt_00000002.pt (the old name) samples what the .safetensors one does"
else
  fail "generate from an old-named checkpoint" "exit $RC: $(head -c 300 "$WORK/old_name_generate.err")"
fi
run old_name_eval eval --checkpoint "$WORK/old_name" --task builtin:sort --examples 20 --device cpu
if [[ $RC -eq 0 ]] && cmp -s <(grep "held-out accuracy" "$WORK/old_name_eval.out") <(grep "held-out accuracy" "$WORK/tiny_eval.out"); then
  pass "eval --checkpoint on a folder of old-named checkpoints: $(grep "held-out accuracy" "$WORK/old_name_eval.out")"
else
  fail "eval of an old-named checkpoint folder" "exit $RC: $(head -c 300 "$WORK/old_name_eval.err")"
fi
if expect_ok old_name_export export --checkpoint "$OLD_CKPT" --out "$WORK/old_name_hf"; then
  check "export --checkpoint ckpt_00000002.pt writes a model folder" test -s "$WORK/old_name_hf/model.safetensors"
fi
# An --out that exists and is empty (a container's volume is such a folder, and no rename can replace a
# mount point): the model is staged inside it and its files move up.
mkdir -p "$WORK/empty_hf"
if expect_ok empty_out_export export --checkpoint "$OLD_CKPT" --out "$WORK/empty_hf"; then
  check "export into an existing empty folder writes config.json and the weights there" \
    test -s "$WORK/empty_hf/config.json" -a -s "$WORK/empty_hf/model.safetensors"
  check "... and leaves no staging folder in it" test -z "$(find "$WORK/empty_hf" -name '.export*')"
fi

# ------------------------------------------------------------------------------------------------
echo "== help"

check_help() {
  local name=$1
  shift 1
  local patterns=()
  while [[ $1 != -- ]]; do
    patterns+=("$1")
    shift
  done
  shift
  run "$name" "$@"
  if [[ $RC -ne 0 ]]; then
    fail "$name" "exit code $RC"
    return
  fi
  if [[ -s $WORK/$name.err ]]; then
    fail "$name" "wrote to stderr: $(head -c 200 "$WORK/$name.err")"
    return
  fi
  local p
  for p in "${patterns[@]}"; do
    if ! grep -qE -- "$p" "$WORK/$name.out"; then
      fail "$name" "output lacks /$p/"
      return
    fi
  done
  pass "$name: exit 0, lists options with defaults"
}

check_help "--help" "train" "generate" "eval" "shakespeare-char +6 layers" -- --help
check_help "--version" "^mygpt-ddp [0-9]" -- --version
check_help "train --help" "--batch-size arg \(=16\)" "--steps arg \(=2000\)" "--preset arg \(=small\)" \
  "--device arg \(=auto\)" "--config" -- train --help
check_help "generate --help" "--checkpoint" "--temperature arg \(=0.8" "--seed arg \(=1337\)" \
  "--max-new-tokens arg \(=200\)" -- generate --help

# ------------------------------------------------------------------------------------------------
echo "== config file"

cat >"$WORK/run.cfg" <<'EOF'
# options as in the CLI, without the dashes
preset = tiny
steps = 5
batch-size = 4
seq-len = 16
eval-every = 0
threads = 1
device = cpu
EOF
run config train builtin:sort --config "$WORK/run.cfg" --steps 3 --out "$WORK/cfg"
if [[ $RC -ne 0 ]]; then
  fail "--config FILE" "exit code $RC; stderr: $(head -c 300 "$WORK/config.err")"
else
  steps_logged=$(metric_values loss "$WORK/cfg/metrics.jsonl" | wc -l)
  if grep -q "batch: 4 x 16 tokens" "$WORK/config.out" && grep -q "2 layers" "$WORK/config.out"; then
    pass "--config FILE: batch size, sequence length and preset come from the file"
  else
    fail "--config FILE" "the file's values were not used: $(grep -E '^(model|batch):' "$WORK/config.out" | tr '\n' ' ')"
  fi
  if [[ $steps_logged -eq 3 && -f $WORK/cfg/ckpt_00000003.safetensors ]]; then
    pass "--config FILE: --steps 3 on the command line overrides steps = 5 in the file"
  else
    fail "--config FILE override" "$steps_logged steps logged; files: $(ls "$WORK/cfg" | tr '\n' ' ')"
  fi
fi
printf 'steps = 3\nbogus-option = 1\n' >"$WORK/bad.cfg"
expect_bad_input "train: unknown option in a config file" "bogus-option" "$WORK/o_badcfg" \
  train builtin:sort "${SMALL[@]}" --config "$WORK/bad.cfg" --out "$WORK/o_badcfg"

# ------------------------------------------------------------------------------------------------
echo "== training on real data, then generation"

CORPUS="$DATA_DIR/tinyshakespeare.txt"
PROMPT="ROMEO:"
MIN_DROP=1.0  # measured: 4.19 -> 2.45 (first loss -> mean of the last 10)
if [[ ! -f $CORPUS ]]; then
  skip "$CORPUS is absent; training on builtin:sort instead"
  CORPUS="builtin:sort"
  PROMPT="3141="
  MIN_DROP=0.8  # measured: 2.49 -> 1.38; the random digits of each prompt put the floor near 1.0
fi
OUT="$WORK/real"
start=$(date +%s)
run real_train train "$CORPUS" --preset small --seq-len 64 --batch-size 16 --threads 1 --device cpu \
  --steps 300 --warmup-steps 30 --lr 2e-3 --eval-every 100 --eval-steps 5 --log-every 50 --seed 1337 --out "$OUT"
seconds=$(($(date +%s) - start))
if [[ $RC -ne 0 ]]; then
  fail "train 300 steps on $CORPUS" "exit code $RC; stderr: $(head -c 300 "$WORK/real_train.err")"
else
  pass "train 300 steps on $(basename "$CORPUS") (${seconds}s)"
  first_line=$(head -n 1 "$WORK/real_train.out")
  if [[ $first_line == "device: cpu" ]]; then pass "first stdout line is 'device: cpu'"; else fail "first stdout line" "'$first_line'"; fi

  METRICS="$OUT/metrics.jsonl"
  # (a read loop, not mapfile: macOS's bash 3.2 has none)
  losses=(); while IFS= read -r v; do losses+=("$v"); done < <(metric_values loss "$METRICS")
  val_losses=(); while IFS= read -r v; do val_losses+=("$v"); done < <(metric_values val_loss "$METRICS")
  train_records=$(grep -c '"loss":' "$METRICS")
  complete_records=$(grep '"loss":' "$METRICS" | grep '"step":' | grep '"lr":' | grep '"grad_norm":' |
    grep '"dt_ms":' | grep -c '"tok_per_sec":')
  if [[ $train_records -eq 300 && $complete_records -eq 300 ]]; then
    pass "metrics.jsonl: 300 records with step/loss/lr/grad_norm/dt_ms/tok_per_sec"
  else
    fail "metrics.jsonl records" "$train_records loss records, $complete_records complete"
  fi
  if [[ ${#val_losses[@]} -ge 3 ]]; then
    pass "metrics.jsonl: ${#val_losses[@]} val_loss records (${val_losses[*]})"
  else
    fail "metrics.jsonl val_loss records" "found ${#val_losses[@]}"
  fi
  if [[ ${#losses[@]} -ge 20 ]]; then
    # The first loss against the mean of the last 10 (single steps are noisy).
    verdict=$(printf '%s\n' "${losses[@]}" | awk -v n="${#losses[@]}" -v drop="$MIN_DROP" '
      NR == 1 { first = $1 }
      NR > n - 10 { sum += $1 }
      END { last = sum / 10; printf "%s %.3f -> %.3f", (last < first - drop) ? "ok" : "bad", first, last }')
    if [[ $verdict == ok* ]]; then
      pass "loss falls by more than $MIN_DROP: ${verdict#ok }"
    else
      fail "loss falls by more than $MIN_DROP" "${verdict#bad }"
    fi
    val_verdict=$(printf '%s\n' "${val_losses[@]}" | awk 'NR == 1 { first = $1 } { last = $1 }
      END { printf "%s %.3f -> %.3f", (last < first - 0.5) ? "ok" : "bad", first, last }')
    if [[ $val_verdict == ok* ]]; then
      pass "validation loss falls: ${val_verdict#ok }"
    else
      fail "validation loss falls" "${val_verdict#bad }"
    fi
  else
    fail "loss falls" "only ${#losses[@]} losses in $METRICS"
  fi
  if [[ -f $OUT/ckpt_00000300.safetensors ]]; then pass "checkpoint ckpt_00000300.safetensors written"; else fail "final checkpoint" "$(ls "$OUT" | tr '\n' ' ')"; fi
  if python3 -c "
import json, sys
run = json.load(open(sys.argv[1]))
assert run['world_size'] == 1 and run['options']['steps'] == '300' and run['versions']['torch'], run
rows = [json.loads(l) for l in open(sys.argv[2])]
assert all('time' in r and 'elapsed_s' in r for r in rows), 'a row without time'
" "$OUT/run.json" "$METRICS" 2>"$WORK/run_json.err"; then
    pass "run.json holds the resolved options, world and versions; every metrics row has time and elapsed_s"
  else
    fail "run.json and metrics rows" "$(tail -c 300 "$WORK/run_json.err")"
  fi
  tmp_files=$(find "$OUT" -name '*.tmp')
  if [[ -z $tmp_files ]]; then pass "no *.tmp file left"; else fail "no *.tmp file left" "$tmp_files"; fi

  GEN=(generate --checkpoint "$OUT" --device cpu --prompt "$PROMPT" --max-new-tokens 120 --temperature 1.0)
  run gen_a "${GEN[@]}" --seed 7
  rc_a=$RC
  run gen_b "${GEN[@]}" --seed 7
  rc_b=$RC
  run gen_c "${GEN[@]}" --seed 8
  rc_c=$RC
  if [[ $rc_a -ne 0 || $rc_b -ne 0 || $rc_c -ne 0 ]]; then
    fail "generate" "exit codes $rc_a $rc_b $rc_c; stderr: $(head -c 300 "$WORK/gen_a.err")"
  else
    # The header lines (device, threads on a CPU, model), then the sample.
    loaded=$(grep -m1 '^model: ' "$WORK/gen_a.out")
    sample=$(sed -n '/^model: /{n;p;q}' "$WORK/gen_a.out")
    if [[ $loaded == "model: checkpoint $OUT/ckpt_"*" (step "* ]]; then pass "generate names the checkpoint it loaded: $loaded"; else fail "generate names the checkpoint it loaded" "'$loaded'"; fi
    if [[ $sample == "$PROMPT"* && $(wc -c <"$WORK/gen_a.out") -gt 120 ]]; then
      pass "generate: the sample continues the prompt: $(printf '%s' "$sample" | head -c 60)"
    else
      fail "generate: the sample continues the prompt" "$(head -c 200 "$WORK/gen_a.out")"
    fi
    if cmp -s "$WORK/gen_a.out" "$WORK/gen_b.out"; then pass "generate: same seed, identical output"; else fail "generate: same seed, identical output"; fi
    if ! cmp -s "$WORK/gen_a.out" "$WORK/gen_c.out"; then pass "generate: different seed, different output"; else fail "generate: different seed, different output"; fi
  fi
fi

finish
