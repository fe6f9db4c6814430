#!/usr/bin/env bash
# Progress lines of long work in a log (stdout not a terminal): prepare over JSON-lines documents,
# eval --hellaswag with its running accuracy and eval --val with its running loss; --quiet turns
# them off. MYGPT_PROGRESS_SECONDS=0 makes every update a line (the default is one per ~10 s).
# Usage: progress_test.sh MYGPT_DDP SHARED_DATA_DIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
DATA_DIR=$(test_data_dir "${2:-}")
make_work_dir progress
export MYGPT_PROGRESS_SECONDS=0
for i in $(seq 300); do printf '{"text": "document %d: the quick brown fox jumps over the lazy dog"}\n' "$i"; done >"$WORK/docs.jsonl"

if expect_ok prep prepare --input "$WORK/docs.jsonl" --out "$WORK/shards" --tokenizer char --val-tokens 500; then
  lines=$(grep -c '^prepare: .* MB (.*%).*MB/s' "$WORK/prep.out")
  check "prepare reports progress by bytes across the documents of one file ($lines lines)" test "$lines" -ge 10
fi
if expect_ok prep_quiet prepare --input "$WORK/docs.jsonl" --out "$WORK/shards_q" --tokenizer char --val-tokens 500 --quiet; then
  check "prepare --quiet prints no progress" bash -c "! grep -q '^prepare:' '$WORK/prep_quiet.out'"
fi
if expect_ok train train "$WORK/shards" --preset tiny --steps 2 --eval-every 0 --device cpu --out "$WORK/run"; then
  if expect_ok eval_val eval --checkpoint "$WORK/run" --val "$WORK/shards" --eval-steps 5 --batch-size 2 --device cpu; then
    check "eval --val reports progress with the running loss" grep -q '^val: 5/5 batches.*running loss' "$WORK/eval_val.out"
  fi
fi
HS=$DATA_DIR/hellaswag/hellaswag_val_full.txt
if [[ -f $HS && -f $DATA_DIR/gpt2/encoder.json ]]; then
  head -c 20000 "$DATA_DIR/tinyshakespeare.txt" >"$WORK/text.txt"
  if expect_ok train_bpe train "$WORK/text.txt" --vocab "$DATA_DIR/gpt2" --preset tiny --steps 1 --eval-every 0 --device cpu --out "$WORK/bpe"; then
    if expect_ok eval_hs eval --checkpoint "$WORK/bpe" --hellaswag "$HS" --examples 12 --device cpu; then
      lines=$(grep -c '^hellaswag: .* examples.*accuracy' "$WORK/eval_hs.out")
      check "eval --hellaswag reports progress with the running accuracy ($lines lines)" test "$lines" -ge 10
    fi
  fi
else
  skip "eval --hellaswag progress (needs $HS and the GPT-2 tokenizer files)"
fi
finish
