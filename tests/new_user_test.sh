#!/usr/bin/env bash
# What a new user meets first, through the binary: the data order `--data-order auto` picks and says,
# learning-rate defaults derived from the values given, a resume that names what it changes, and
# `--resume auto` on a folder whose run stopped before its first checkpoint.
# usage: new_user_test.sh PATH/TO/mygpt-ddp
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
make_work_dir new_user

# A small text: 2,151 characters, 1,935 of them for training.
for i in $(seq 1 60); do echo "line $i: the quick brown fox jumps."; done >"$WORK/text.txt"
TINY=(--preset tiny --batch-size 4 --seq-len 16 --eval-every 0 --log-every 1 --threads 1 --device cpu)

# --- the data order -------------------------------------------------------------------------------
# 40 steps x 64 tokens read the training text 1.32 times: shuffled; 8 steps read a quarter: sequential.
if expect_ok order_many train "$WORK/text.txt" "${TINY[@]}" --steps 40 --out "$WORK/many"; then
  check "a run that reads its text more than once is shuffled, and says so: $(grep '^data order' "$WORK/order_many.out")" \
    grep -q "^data order: shuffled rows, a fresh order each epoch (the run reads its training data 1.3[0-9] times" "$WORK/order_many.out"
fi
if expect_ok order_once train "$WORK/text.txt" "${TINY[@]}" --steps 8 --out "$WORK/once"; then
  check "a run that reads its data at most once reads it in order: $(grep '^data order' "$WORK/order_once.out")" \
    grep -q "^data order: sequential (the run reads its training data 0.2[0-9] times" "$WORK/order_once.out"
fi
if expect_ok order_given train "$WORK/text.txt" "${TINY[@]}" --steps 2 --data-order shuffled --out "$WORK/given"; then
  check "a given order is used without a note" bash -c "! grep -q '^data order' '$WORK/order_given.out'"
fi

# --- learning rates -------------------------------------------------------------------------------
if expect_ok warmup_default train "$WORK/text.txt" "${TINY[@]}" --steps 20 --out "$WORK/warmup"; then
  check "the default warm-up (100) of a 20-step run shrinks with one line: $(grep 'warm' "$WORK/warmup_default.out")" \
    grep -qx "note: the default warm-up of 100 steps is longer than the 20-step run; warming up for 2" \
    "$WORK/warmup_default.out"
  check "... and min-lr is a tenth of --lr (run.json: $(grep -o '"min-lr": "[^"]*"' "$WORK/warmup/run.json"))" \
    grep -q '"min-lr": "1e-04"' "$WORK/warmup/run.json"
fi
expect_bad warmup_given "--warmup-steps 50 is longer than the run \(--steps 20\)" \
  train "$WORK/text.txt" "${TINY[@]}" --steps 20 --warmup-steps 50 --out "$WORK/w2" && pass "a given warm-up longer than the run is refused"
expect_bad lr_below_min "--lr 5e-05 is below --min-lr 1e-04" \
  train "$WORK/text.txt" "${TINY[@]}" --steps 2 --lr 5e-5 --min-lr 1e-4 --out "$WORK/w3" && pass "--lr below --min-lr is refused"

# --- resume ---------------------------------------------------------------------------------------
if expect_ok first train "$WORK/text.txt" "${TINY[@]}" --steps 4 --warmup-steps 1 --out "$WORK/run"; then
  if expect_ok longer train "$WORK/text.txt" "${TINY[@]}" --steps 8 --warmup-steps 1 --lr 5e-4 --resume auto --out "$WORK/run"; then
    check "a resume names what it changes in one line: $(grep '^resuming with' "$WORK/longer.out")" \
      grep -q "^resuming with changes: --steps 4 -> 8, --lr 0.001 -> 5e-04, --min-lr 1e-04 -> 5e-05 (" "$WORK/longer.out"
  fi
  if expect_ok same train "$WORK/text.txt" "${TINY[@]}" --steps 8 --warmup-steps 1 --lr 5e-4 --resume auto --out "$WORK/run"; then
    check "a resume that changes nothing says nothing of changes" bash -c "! grep -q '^resuming with' '$WORK/same.out'"
  fi
fi

# A finished run started again (issue 64: its final validation line was cut from metrics.jsonl): nothing to
# train, and every record stays as it was.
FINISHED=(train "$WORK/text.txt" --preset tiny --batch-size 4 --seq-len 16 --log-every 1 --threads 1 --device cpu --steps 3
          --warmup-steps 1 --eval-every 2 --eval-steps 1 --out "$WORK/finished")
if expect_ok finished "${FINISHED[@]}"; then
  cp "$WORK/finished/metrics.jsonl" "$WORK/finished_metrics.before" && cp "$WORK/finished/run.json" "$WORK/finished_run.before"
  check "the finished run recorded its final validation (step 3): $(grep -c val_loss "$WORK/finished/metrics.jsonl") line(s)" \
    bash -c "grep val_loss '$WORK/finished/metrics.jsonl' | grep -q '\"step\":3,'"
  if expect_ok finished_again "${FINISHED[@]}" --resume auto; then
    check "started again at its last step: nothing to train, in one line: $(grep 'nothing' "$WORK/finished_again.out")" \
      grep -q "^nothing to train: the run is at step 3 of 3" "$WORK/finished_again.out"
    check "... metrics.jsonl is unchanged (the final validation line kept)" cmp -s "$WORK/finished_metrics.before" "$WORK/finished/metrics.jsonl"
    check "... run.json is unchanged" cmp -s "$WORK/finished_run.before" "$WORK/finished/run.json"
  fi
fi

# A run killed before its first checkpoint left metrics.jsonl and run.json: --resume auto starts afresh.
mkdir -p "$WORK/killed"
echo '{"step":0,"loss":9.9}' >"$WORK/killed/metrics.jsonl"
echo '{}' >"$WORK/killed/run.json"
echo keep >"$WORK/killed/notes.txt"
if expect_ok restart train "$WORK/text.txt" "${TINY[@]}" --steps 3 --resume auto --out "$WORK/killed"; then
  check "--resume auto without a checkpoint starts afresh, saying so: $(grep 'resume auto' "$WORK/restart.out")" \
    grep -q "^--resume auto: no checkpoint to continue; removed 2 file(s) of an earlier run" "$WORK/restart.out"
  check "... the old records are gone (3 step records, no loss 9.9)" \
    bash -c "[[ \$(grep -c '\"loss\"' '$WORK/killed/metrics.jsonl') -eq 3 ]] && ! grep -q '\"loss\":9.9' '$WORK/killed/metrics.jsonl'"
  check "... and other files are left alone" test -f "$WORK/killed/notes.txt"
fi
# --- prepare and eval: validation is the end of a text --------------------------------------------
# shard_counts FILE: "count token" lines of an llm.c shard's tokens.
shard_counts() { od -An -tu2 -j1024 -v "$1" | tr -s ' ' '\n' | grep -v '^$' | sort -n | uniq -c | awk '{print $1 ":" $2}' | tr '\n' ' '; }
{ printf 'a%.0s' $(seq 900); printf 'b%.0s' $(seq 100); } >"$WORK/ab.txt"
if expect_ok prep_ab prepare --tokenizer char --input "$WORK/ab.txt" --out "$WORK/ab" --val-tokens 100; then
  check "prepare puts the end of the text into val (val: $(shard_counts "$WORK/ab/val_000000.bin"); train: $(shard_counts "$WORK/ab/train_000000.bin"))" \
    test "$(shard_counts "$WORK/ab/val_000000.bin")|$(shard_counts "$WORK/ab/train_000000.bin")" = "100:1 |900:0 "
  expect_bad prep_again "--out '$WORK/ab' holds shards of an earlier prepare \(char_vocab.txt and more\).*--overwrite" \
    prepare --tokenizer char --input "$WORK/ab.txt" --out "$WORK/ab" --val-tokens 100 &&
    pass "prepare into a folder holding shards is refused"
  echo keep >"$WORK/ab/notes.txt"
  if expect_ok prep_over prepare --tokenizer char --input "$WORK/ab.txt" --out "$WORK/ab" --val-tokens 0 --overwrite; then
    check "--overwrite replaces the shards (no val shard left) and keeps other files" \
      bash -c "[[ ! -e '$WORK/ab/val_000000.bin' && -f '$WORK/ab/notes.txt' && -f '$WORK/ab/train_000000.bin' ]]"
    # An --overwrite that fails after tokenizing (every token held out for validation) leaves the
    # earlier shards and tokenizer as they were, and no staging folder.
    rm -rf "$WORK/ab.before" && cp -R "$WORK/ab" "$WORK/ab.before"
    expect_bad prep_over_fails "all 1000 tokens went to validation" \
      prepare --tokenizer char --input "$WORK/ab.txt" --out "$WORK/ab" --val-tokens 5000 --overwrite &&
      check "a failed prepare --overwrite leaves the earlier files as they were" \
        diff -r "$WORK/ab.before" "$WORK/ab"
  fi
fi
if expect_ok char_model train "$WORK/text.txt" "${TINY[@]}" --steps 2 --out "$WORK/char"; then
  trained=$(sed -n 's/.*| train \([0-9]*\) tokens.*/\1/p' "$WORK/char_model.out")
  total=$(wc -m <"$WORK/text.txt")
  if expect_ok eval_text eval --checkpoint "$WORK/char" --val "$WORK/text.txt" --batch-size 2 --seq-len 16 --eval-steps 2 --device cpu; then
    check "eval --val TEXT scores the end train held out ($((total - trained)) of $total tokens): $(grep '^val data' "$WORK/eval_text.out")" \
      grep -q "its last 10%: $((total - trained)) tokens" "$WORK/eval_text.out"
  fi
fi

# --- the GPT-2 tokenizer beside prepared shards; HellaSwag counts -------------------------------------
GPT2=$(test_data_dir)/gpt2
if [[ -f $GPT2/encoder.json && -f $GPT2/vocab.bpe ]]; then
  for i in $(seq 1 200); do echo "And so the story of line $i goes on."; done >"$WORK/words.txt"
  if expect_ok prep_gpt2 prepare --vocab "$GPT2" --input "$WORK/words.txt" --out "$WORK/bpe" --val-tokens 400; then
    check "prepare leaves GPT-2's tokenizer beside the shards" test -f "$WORK/bpe/encoder.json" -a -f "$WORK/bpe/vocab.bpe"
    if expect_ok train_bpe train "$WORK/bpe" "${TINY[@]}" --steps 1 --out "$WORK/bpe_run"; then
      check "a run on those shards records the tokenizer without --vocab" grep -q '"tokenizer": "gpt2"' "$WORK/bpe_run/run.json"
      if expect_ok gen_bpe generate --checkpoint "$WORK/bpe_run" --prompt "And so" --max-new-tokens 3 --device cpu; then
        pass "generate needs no --vocab for it"
      fi
      printf '%s\n' '{"ctx": "A man is sitting on a roof. he", "label": 0, "endings": ["is up.", "is down.", "is in.", "is out."]}' \
        '{"ctx": "A lady walks. She", "label": 1, "endings": ["swings.", "pulls.", "runs.", "stands."]}' >"$WORK/hs.jsonl"
      if expect_ok hs_two eval --checkpoint "$WORK/bpe_run" --hellaswag "$WORK/hs.jsonl" --hellaswag-examples 2 --device cpu; then
        check "eval takes train's --hellaswag-examples: $(grep '^hellaswag accuracy' "$WORK/hs_two.out")" \
          grep -q "(.*/2 examples" "$WORK/hs_two.out"
      fi
      expect_bad hs_too_many "hs\.jsonl' holds 2 examples, fewer than the 5 asked for" \
        eval --checkpoint "$WORK/bpe_run" --hellaswag "$WORK/hs.jsonl" --examples 5 --device cpu &&
        pass "a HellaSwag count above the file's is refused"
    fi
  fi
else
  skip "GPT-2 tokenizer checks: no encoder.json and vocab.bpe in $GPT2"
fi
# --- samples during training keep their newlines and go into metrics.jsonl ---------------------------
if expect_ok sampled train "$WORK/text.txt" "${TINY[@]}" --steps 2 --sample-every 1 --sample-tokens 4 \
     --sample-prompt $'line 1\nline' --out "$WORK/sampled"; then
  check "a sample prints on lines of its own, newlines kept" \
    bash -c "grep -A2 -x 'step 1 | sample:' '$WORK/sampled.out' | sed -n 2p | grep -qx 'line 1'"
  check "... and is in metrics.jsonl ($(grep -c '"sample"' "$WORK/sampled/metrics.jsonl") records)" \
    grep -q '"sample":"line 1\\nline' "$WORK/sampled/metrics.jsonl"
fi
# --- scripts/demo.sh builds what it runs ----------------------------------------------------------
check "scripts/demo.sh has setup build only the binary (MYGPT_BUILD_TARGETS=mygpt-ddp)" \
  grep -q '^MYGPT_BUILD_TARGETS=mygpt-ddp "$repo/scripts/setup.sh"' "$REPO_DIR/scripts/demo.sh"
check "... and scripts/setup.sh builds only MYGPT_BUILD_TARGETS when it is set" \
  grep -q -- 'for target in $MYGPT_BUILD_TARGETS; do targets+=(--target "$target")' "$REPO_DIR/scripts/setup.sh"
# --- plan: --gpu-memory plans for a GPU; the largest micro-batch is one the total batch divides ----------
if expect_ok plan_gpu plan --preset gpt2 --gpu-memory 80 --ranks 8; then
  check "plan --gpu-memory plans for CUDA GPUs without --device cuda" grep -q "^world: 8 rank(s) on CUDA GPUs" "$WORK/plan_gpu.out"
  fits=$(sed -n 's/.*the largest micro-batch that fits: \([0-9]*\) rows.*/\1/p' "$WORK/plan_gpu.out")
  usable=$(sed -n 's/.*divides on 8 rank(s): \([0-9]*\)$/\1/p' "$WORK/plan_gpu.out")
  usable=${usable:-$fits}
  if [[ -n $usable && $usable -gt 0 ]] && (( 524288 % (usable * 1024 * 8) == 0 )); then
    pass "plan's suggested micro-batch ($usable of the $fits that fit) divides --total-batch-tokens 524288 on 8 ranks"
  else
    fail "plan's micro-batch suggestion" "$(grep 'largest' "$WORK/plan_gpu.out")"
  fi
fi
# --- plan and fp16: the same 16-bit memory as bf16; an fp32 GPU plan offers --precision auto ----------------
if expect_ok plan_fp16 plan --preset gpt2-medium --gpu-memory 16 --ranks 4 --precision fp16 &&
   expect_ok plan_bf16 plan --preset gpt2-medium --gpu-memory 16 --ranks 4 --precision bf16 &&
   expect_ok plan_fp32 plan --preset gpt2-medium --gpu-memory 16 --ranks 4 --precision fp32; then
  check "plan --precision fp16 says so" grep -q "| precision fp16 autocast with dynamic loss scaling |" "$WORK/plan_fp16.out"
  total() { sed -n 's/^  total *\([0-9.]*\) MiB.*/\1/p' "$WORK/$1.out"; }
  check "plan: fp16 needs the memory bf16 does ($(total plan_fp16) MiB)" test "$(total plan_fp16)" = "$(total plan_bf16)"
  check "plan: fp32 needs more ($(total plan_fp32) MiB)" awk -v a="$(total plan_fp32)" -v b="$(total plan_bf16)" 'BEGIN { exit !(a > b) }'
  check "an fp32 GPU plan lists --precision auto among the memory options" grep -q -- "--precision auto" "$WORK/plan_fp32.out"
fi
expect_bad loss_scale_fp32 "^mygpt-ddp: error: --loss-scale-init has no effect with fp32 \(loss scaling is fp16's\)$" \
  train builtin:sort --preset tiny --steps 1 --device cpu --out "$WORK/ls" --loss-scale-init 8 && pass "--loss-scale-init without fp16 is refused"
# --- plan --help lists the options that change the plan; plan still takes train's whole command line ---
if expect_ok plan_help plan --help; then
  check "plan --help lists --gpu-memory and --batch-size" \
    bash -c "grep -qE -- '--gpu-memory[ =]' '$WORK/plan_help.out' && grep -qE -- '--batch-size[ =]' '$WORK/plan_help.out'"
  check "plan --help lists none of --sample-prompt, --hellaswag, --log-every" \
    bash -c "! grep -qE -- '--(sample-prompt|hellaswag|log-every)[ =]' '$WORK/plan_help.out'"
  # plan prints the checkpoints' disk need, which these flags change: its --help shows them
  check "plan --help lists --checkpoint-every, --keep-checkpoints and --final-checkpoint" \
    bash -c "grep -qE -- '--checkpoint-every[ =]' '$WORK/plan_help.out' && grep -qE -- '--keep-checkpoints[ =]' '$WORK/plan_help.out' && grep -qE -- '--final-checkpoint[ =]' '$WORK/plan_help.out'"
fi
if expect_ok plan_train_line plan --preset tiny --batch-size 4 --checkpoint-every 5 --keep-checkpoints 2 \
     --sample-every 10 --sample-prompt hi --log-every 5; then
  check "plan given train-only flags still plans" grep -q "^per step and rank: 4 x " "$WORK/plan_train_line.out"
  check "plan prints the checkpoints' size and what --out holds at once" \
    grep -qE "^checkpoints: about [0-9.]+ MiB each; at most [0-9.]+ MiB in --out at once \(3 more checkpoint" "$WORK/plan_train_line.out"
fi

# --- the log says what changes the run's arithmetic or speed (issue 40: nothing said Muon or recompute) ---
if expect_ok muon_recompute train builtin:sort --preset tiny --steps 2 --eval-every 0 --threads 1 --device cpu \
     --optimizer muon --recompute mlp --out "$WORK/muon_recompute"; then
  check "the log says Muon is on" grep -q "^optimizer: Muon for the blocks' matrices" "$WORK/muon_recompute.out"
  check "the log says recompute is on" grep -q "^recompute: each block's MLP activations are recomputed" "$WORK/muon_recompute.out"
fi
finish
