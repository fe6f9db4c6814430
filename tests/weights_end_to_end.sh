#!/usr/bin/env bash
# End-to-end tests of weights in and out and of run directories, through the binary:
#   Hugging Face folders in generate/eval (against transformers' own loss), train --init-from, export
#   (loaded back by transformers), an --out holding a run, eval --val on a shard folder and on text,
#   and flags that would have no effect.
# Usage: weights_end_to_end.sh MYGPT_DDP SHARED_DATA_DIR PYTHON HF_REFERENCE_SCRIPT
# Parts needing transformers, or the shared GPT-2 tokenizer files, skip with a line saying so.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
DATA_DIR=$(test_data_dir "${2:-}")
PY=${3:-python3}
HF_REF=${4:-$TESTS_DIR/hf_reference.py}
make_work_dir weights
GPT2_DIR=$DATA_DIR/gpt2
SHAKESPEARE=$DATA_DIR/tinyshakespeare.txt
CPU=(--device cpu)

have_transformers=""
"$PY" -c "import transformers, safetensors" >/dev/null 2>&1 && have_transformers=1
have_bpe=""
[[ -f $GPT2_DIR/encoder.json && -f $GPT2_DIR/vocab.bpe ]] && have_bpe=1

# write_tokens FILE ID...: an llm.c token file (256 int32 header: magic, version 1, count; uint16 ids).
write_tokens() {
  "$PY" - "$@" <<'PY'
import struct, sys
path, ids = sys.argv[1], [int(t) for t in sys.argv[2:]]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)))
    f.write(struct.pack(f"<{len(ids)}H", *ids))
PY
}
# relative_difference A B: |A - B| / |B|.
relative_difference() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; printf "%.3g", d / b }'; }
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# --- Hugging Face folder in, exact against transformers ---------------------------------------------
TOKENS=$(seq 0 64 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7919 + 13) % 50257 }')
if [[ -z $have_transformers || -z $have_bpe ]]; then
  skip "Hugging Face import (needs python with transformers and $GPT2_DIR)"
else
  HF=$WORK/hf
  run_cmd hf_make "$PY" "$HF_REF" make "$HF" --vocab 50257 --seed 3 --tokens "$TOKENS"
  cp "$GPT2_DIR/encoder.json" "$HF/vocab.json" && cp "$GPT2_DIR/vocab.bpe" "$HF/merges.txt"
  hf_loss=$(grep -o '"loss": [-0-9.e]*' "$WORK/hf_make.out" | head -1 | cut -d' ' -f2)
  # shellcheck disable=SC2086  # one word per id
  write_tokens "$WORK/val_tokens.bin" ${TOKENS//,/ }
  if expect_ok eval_hf eval --checkpoint "$HF" --val "$WORK/val_tokens.bin" --eval-steps 1 --batch-size 1 --seq-len 64 "${CPU[@]}"; then
    ours=$(sed -n 's/^val loss: \([0-9.]*\).*/\1/p' "$WORK/eval_hf.out")
    diff=$(relative_difference "$ours" "$hf_loss")
    # eval prints 4 decimals: the difference allowed is that rounding (5e-5 of a loss near 10) and no more.
    if [[ -n $ours ]] && below "$diff" 1e-5; then
      pass "eval of a Hugging Face folder gives transformers' loss ($ours vs $hf_loss)"
    else
      fail "eval of a Hugging Face folder gives transformers' loss" "ours '$ours', transformers '$hf_loss'"
    fi
    check "eval names the folder it loaded" grep -q "^model: Hugging Face folder $HF" "$WORK/eval_hf.out"
  fi
  if expect_ok gen_hf generate --checkpoint "$HF" --prompt "Hello, I'm a language model," --max-new-tokens 8 --seed 1 "${CPU[@]}"; then
    check "generate from a Hugging Face folder uses its tokenizer" grep -q "^Hello, I'm a language model," "$WORK/gen_hf.out"
  fi

  # --- train --init-from: weights from the folder, everything else fresh -------------------------
  head -c 30000 "$SHAKESPEARE" >"$WORK/shakespeare.txt" 2>/dev/null || printf 'First Citizen: we are accounted poor citizens.\n%.0s' {1..600} >"$WORK/shakespeare.txt"
  FT=(train "$WORK/shakespeare.txt" --init-from "$HF" --steps 4 --batch-size 2 --seq-len 32 --eval-every 0 --lr 1e-3 "${CPU[@]}")
  if expect_ok init_from "${FT[@]}" --out "$WORK/ft"; then
    check "--init-from takes the folder's tokenizer for text data" grep -q "gpt2 tokenizer" "$WORK/init_from.out"
    check "--init-from pads the vocabulary to 50304 rows" grep -q "vocab 50304" "$WORK/init_from.out"
    check "--init-from starts at step 0 with the folder's weights" grep -q "^weights: Hugging Face folder" "$WORK/init_from.out"
    first_loss=$(grep -o '"loss":[0-9.]*' "$WORK/ft/metrics.jsonl" | head -1 | cut -d: -f2)
    # A fresh model starts near ln(50304) = 10.8; this one starts at the random HF model's loss (~13).
    if below 12 "${first_loss:-0}"; then pass "the first loss is the imported model's ($first_loss), not a fresh one's"; else fail "the first loss is the imported model's" "'$first_loss'"; fi
  fi
  expect_bad_input init_from_shape "--n-layer 3 differs from the model of Hugging Face folder" "$WORK/ft_shape" "${FT[@]}" --n-layer 3 --out "$WORK/ft_shape"
  # --init-from with --resume auto, as a requeued fine-tuning job runs: the weights while --out has no
  # checkpoint, its own checkpoint after that.
  if expect_ok init_from_requeued "${FT[@]}" --resume auto --out "$WORK/ft_both"; then
    check "--init-from with --resume auto and no checkpoint starts from the weights" grep -q "^weights: Hugging Face folder" "$WORK/init_from_requeued.out"
    if expect_ok init_from_requeued_again "${FT[@]}" --resume auto --out "$WORK/ft_both"; then
      check "requeued again, it resumes its own checkpoint" grep -q "resumed from $WORK/ft_both/ckpt_00000004.safetensors at step 4" "$WORK/init_from_requeued_again.out"
      check "and says that --init-from is not used" grep -q "^--init-from $HF not used: resuming the run's own checkpoint" "$WORK/init_from_requeued_again.out"
    fi
  fi

  # --- export: transformers loads it and gives our loss; its tokenizer is GPT-2's -----------------
  if [[ -d $WORK/ft ]] && expect_ok export_ft export --checkpoint "$WORK/ft" --out "$WORK/exported"; then
    for f in config.json model.safetensors vocab.json merges.txt; do
      check "export writes $f" test -s "$WORK/exported/$f"
    done
    check "export leaves no temporary folder" test -z "$(find "$WORK" -maxdepth 1 -name '.*export*')"
    run eval_exported_ours eval --checkpoint "$WORK/ft" --val "$WORK/val_tokens.bin" --eval-steps 1 --batch-size 1 --seq-len 32 "${CPU[@]}"
    ours=$(sed -n 's/^val loss: \([0-9.]*\).*/\1/p' "$WORK/eval_exported_ours.out")
    run_cmd loss_exported "$PY" "$HF_REF" loss "$WORK/exported" --tokens "$(echo "$TOKENS" | cut -d, -f1-33)"
    theirs=$(grep -o '"loss": [-0-9.e]*' "$WORK/loss_exported.out" | head -1 | cut -d' ' -f2)
    if [[ -n $ours && -n $theirs ]] && below "$(relative_difference "$ours" "$theirs")" 1e-5; then
      pass "transformers loads the export and gives our loss ($theirs vs $ours)"
    else
      fail "transformers loads the export and gives our loss" "ours '$ours', transformers '$theirs' $(tail -c 300 "$WORK/loss_exported.err")"
    fi
    run_cmd tokenizer_exported "$PY" -c "
import sys; from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1]); print(t.encode('Hello world'))" "$WORK/exported"
    check "transformers reads the exported tokenizer as GPT-2's" grep -qF "[15496, 995]" "$WORK/tokenizer_exported.out"
    # The tokenizer.json export writes is what AutoTokenizer reads; tokenizers gives our ids on it (unit tests).
    if "$PY" -c "import tokenizers" >/dev/null 2>&1 && [[ -f $SHAKESPEARE ]]; then
      TOKREF=$TESTS_DIR/tokenizer_reference.py
      run_cmd gpt2_texts "$PY" "$TOKREF" texts "$SHAKESPEARE" "$DATA_DIR/hellaswag/hellaswag_val_full.txt" "$WORK/gpt2_texts.json"
      run_cmd gpt2_auto "$PY" "$TOKREF" auto "$WORK/exported" "$WORK/gpt2_texts.json" "$WORK/gpt2_auto.json"
      run_cmd gpt2_ref "$PY" "$TOKREF" encode "$WORK/exported/tokenizer.json" "$WORK/gpt2_texts.json" "$WORK/gpt2_ref.json"
      run_cmd gpt2_same "$PY" -c "
import json, sys
a, b = (json.load(open(p, encoding='utf-8')) for p in sys.argv[1:])
assert a.keys() == b.keys() and all(a[k]['ids'] == b[k]['ids'] for k in a), 'ids differ'
print(len(a), 'texts equal')" "$WORK/gpt2_auto.json" "$WORK/gpt2_ref.json"
      check "AutoTokenizer reads the exported GPT-2 tokenizer.json ($(cat "$WORK/gpt2_same.out"))" test "$RC" -eq 0 -a -s "$WORK/exported/tokenizer.json"
    fi
  fi
fi

# --- a character model: export with its vocabulary, generate from the export ------------------------
CHAR_TEXT=$WORK/chars.txt
for _ in $(seq 200); do printf 'the quick brown fox jumps over the lazy dog.\n'; done >"$CHAR_TEXT"
TINY=(--preset tiny --batch-size 4 --seq-len 16 --eval-every 0 "${CPU[@]}")
if expect_ok char_train train "$CHAR_TEXT" "${TINY[@]}" --steps 6 --out "$WORK/char"; then
  if expect_ok char_export export --checkpoint "$WORK/char" --out "$WORK/char_hf"; then
    check "a character model exports its characters (char_vocab.txt)" test -s "$WORK/char_hf/char_vocab.txt"
    check "... and says it has no Hugging Face tokenizer" grep -q "no Hugging Face tokenizer" "$WORK/char_export.out"
    if expect_ok char_gen generate --checkpoint "$WORK/char_hf" --prompt "the " --max-new-tokens 20 "${CPU[@]}"; then
      check "generate reads an exported character model" grep -q "^the " "$WORK/char_gen.out"
    fi
  fi
  expect_bad_input export_again "--out '$WORK/char_hf' is not empty" "" export --checkpoint "$WORK/char" --out "$WORK/char_hf"
  run export_overwrite export --checkpoint "$WORK/char" --out "$WORK/char_hf" --overwrite
  check "export --overwrite replaces the model files (exit $RC)" test "$RC" -eq 0 -a -s "$WORK/char_hf/config.json"
  # An --overwrite that fails once files are being written (rotary positions with LayerNorm: no
  # transformers class, found when the model is written) leaves the old model as it was.
  if expect_ok char_rotary_ln train "$CHAR_TEXT" "${TINY[@]}" --positions rotary --norm layernorm --steps 1 \
      --out "$WORK/char_rotary_ln"; then
    rm -rf "$WORK/char_hf.before" && cp -R "$WORK/char_hf" "$WORK/char_hf.before"
    expect_bad export_overwrite_fails "no transformers class" \
      export --checkpoint "$WORK/char_rotary_ln" --out "$WORK/char_hf" --overwrite &&
      check "a failed export --overwrite leaves the old model files as they were, and no staging folder" \
        diff -r "$WORK/char_hf.before" "$WORK/char_hf"
  fi
  printf 'not a folder' >"$WORK/a_file"
  expect_bad_input export_to_file "--out '$WORK/a_file' is a file" "" export --checkpoint "$WORK/char" --out "$WORK/a_file"

  # eval --val on a text file, encoded with the checkpoint's characters.
  if expect_ok char_eval_text eval --checkpoint "$WORK/char" --val "$CHAR_TEXT" --eval-steps 2 --batch-size 2 "${CPU[@]}"; then
    check "eval --val takes a text file for a character model" grep -q "^val loss: " "$WORK/char_eval_text.out"
  fi
fi

# --- a tokenizer.json (nanochat's GPT-4-style split): train on text with it, generate, export, reload --
TOKREF=$TESTS_DIR/tokenizer_reference.py
if "$PY" -c "import tokenizers" >/dev/null 2>&1 && [[ -f $SHAKESPEARE ]]; then
  run_cmd tokjson_make "$PY" "$TOKREF" make-gpt4 "$SHAKESPEARE" "$WORK/tokjson"
  head -c 100000 "$SHAKESPEARE" >"$WORK/tokjson_text.txt"
  if expect_ok tokjson_train train "$WORK/tokjson_text.txt" "${TINY[@]}" --vocab "$WORK/tokjson" --steps 2 --out "$WORK/tokjson_run"; then
    check "text with --vocab DIR holding a tokenizer.json is tokenized by it" grep -q "hf tokenizer" "$WORK/tokjson_train.out"
    if expect_ok tokjson_gen generate --checkpoint "$WORK/tokjson_run" --prompt "ROMEO:" --max-new-tokens 5 "${CPU[@]}"; then
      check "generate encodes and decodes with the run's tokenizer.json" grep -q "^ROMEO:" "$WORK/tokjson_gen.out"
    fi
    if expect_ok tokjson_export export --checkpoint "$WORK/tokjson_run" --out "$WORK/tokjson_hf"; then
      check "export writes the tokenizer.json" cmp -s "$WORK/tokjson/tokenizer.json" "$WORK/tokjson_hf/tokenizer.json"
      if [[ -n $have_transformers ]]; then
        run_cmd tokjson_texts "$PY" "$TOKREF" texts "$SHAKESPEARE" "$DATA_DIR/hellaswag/hellaswag_val_full.txt" "$WORK/tokjson_texts.json"
        run_cmd tokjson_auto "$PY" "$TOKREF" auto "$WORK/tokjson_hf" "$WORK/tokjson_texts.json" "$WORK/tokjson_auto.json"
        run_cmd tokjson_ref "$PY" "$TOKREF" encode "$WORK/tokjson/tokenizer.json" "$WORK/tokjson_texts.json" "$WORK/tokjson_ref.json"
        run_cmd tokjson_same "$PY" -c "
import json, sys
a, b = (json.load(open(p, encoding='utf-8')) for p in sys.argv[1:])
assert a.keys() == b.keys() and all(a[k]['ids'] == b[k]['ids'] for k in a), 'ids differ'
print(len(a), 'texts equal')" "$WORK/tokjson_auto.json" "$WORK/tokjson_ref.json"
        check "AutoTokenizer loads the exported tokenizer.json with the same ids ($(cat "$WORK/tokjson_same.out"))" test "$RC" -eq 0
      else
        skip "AutoTokenizer on the exported tokenizer.json (needs transformers)"
      fi
      if expect_ok tokjson_gen_hf generate --checkpoint "$WORK/tokjson_hf" --prompt "ROMEO:" --max-new-tokens 5 "${CPU[@]}"; then
        check "generate reads the export's tokenizer.json" grep -q "^ROMEO:" "$WORK/tokjson_gen_hf.out"
      fi
      if expect_ok tokjson_eval_hf eval --checkpoint "$WORK/tokjson_hf" --val "$WORK/tokjson_text.txt" --eval-steps 1 --batch-size 2 --seq-len 16 "${CPU[@]}"; then
        check "eval --val encodes text with the export's tokenizer.json" grep -q "^val loss: " "$WORK/tokjson_eval_hf.out"
      fi
      # A folder exported onto itself: its tokenizer is read before the old files go.
      if expect_ok tokjson_self_export export --checkpoint "$WORK/tokjson_hf" --out "$WORK/tokjson_hf" --overwrite; then
        check "export of a folder onto itself keeps its tokenizer.json" cmp -s "$WORK/tokjson/tokenizer.json" "$WORK/tokjson_hf/tokenizer.json"
        expect_ok tokjson_self_gen generate --checkpoint "$WORK/tokjson_hf" --prompt "ROMEO:" --max-new-tokens 5 "${CPU[@]}" &&
          check "... and generates as before" cmp -s "$WORK/tokjson_gen_hf.out" "$WORK/tokjson_self_gen.out"
      fi
    fi
  fi
  # prepare with the tokenizer.json (chosen by --vocab's folder, no --tokenizer): the shards' ids are
  # tokenizers' own (the document's delimiter, nanochat's <|bos|>, then encode(text)) over the whole of
  # Tiny Shakespeare, which prepare cuts into pieces for its 2 threads, the tokenizer goes beside them,
  # and a run on the shards trains, records it and generates with it.
  if expect_ok tokjson_prepare prepare --vocab "$WORK/tokjson" --input "$SHAKESPEARE" \
       --out "$WORK/tokjson_shards" --val-tokens 0 --threads 2; then
    check "prepare writes the tokenizer.json beside the shards" \
      cmp -s "$WORK/tokjson/tokenizer.json" "$WORK/tokjson_shards/tokenizer.json"
    run_cmd tokjson_shard_ids "$PY" -c "
import struct, sys
from tokenizers import Tokenizer
shard, tokenizer_json, text = sys.argv[1:]
data = open(shard, 'rb').read()
header = struct.unpack('<256i', data[:1024])
ids = list(struct.unpack(f'<{header[2]}H', data[1024:]))
tok = Tokenizer.from_file(tokenizer_json)
expected = [tok.token_to_id('<|bos|>')] + tok.encode(open(text, encoding='utf-8').read(), add_special_tokens=False).ids
assert ids == expected, f'{len(ids)} ids against {len(expected)}; first difference at ' + str(next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b), min(len(ids), len(expected))))
print(len(ids), 'ids equal')" "$WORK/tokjson_shards/train_000000.bin" "$WORK/tokjson/tokenizer.json" "$SHAKESPEARE"
    check "prepare's shards hold tokenizers' ids ($(cat "$WORK/tokjson_shard_ids.out") $(tail -n 1 "$WORK/tokjson_shard_ids.err"))" \
      test "$RC" -eq 0
    if expect_ok tokjson_shards_train train "$WORK/tokjson_shards" "${TINY[@]}" --steps 2 --out "$WORK/tokjson_shards_run"; then
      if expect_ok tokjson_shards_gen generate --checkpoint "$WORK/tokjson_shards_run" --prompt "ROMEO:" --max-new-tokens 5 "${CPU[@]}"; then
        check "a run on those shards generates with the tokenizer beside them" grep -q "^ROMEO:" "$WORK/tokjson_shards_gen.out"
      fi
    fi
  fi
  mkdir -p "$WORK/wordpiece"
  printf '{"model": {"type": "WordPiece", "vocab": {"a": 0}}}' >"$WORK/wordpiece/tokenizer.json"
  expect_bad_input tokjson_wordpiece "$WORK/wordpiece/tokenizer.json: model type WordPiece is not supported" "$WORK/wp_run" \
    train "$WORK/tokjson_text.txt" "${TINY[@]}" --vocab "$WORK/wordpiece" --steps 1 --out "$WORK/wp_run"
else
  skip "tokenizer.json end to end (needs Python's tokenizers and $SHAKESPEARE)"
fi

# --- an imported Qwen3 folder with its own tokenizer.json (NFC normalizer, Qwen2's split) ---------------
# transformers makes the model, tokenizers trains the tokenizer: our greedy ids from a text prompt (one
# character decomposed, so the normalizer matters) equal transformers' generate() on tokenizers' ids; the
# folder then trains on text with that tokenizer, evaluates, generates, and exports a folder that
# transformers generates the same ids from.
FAMREF=$TESTS_DIR/family_reference.py
QWEN_PROMPT=$'Cafe\u0301 ROMEO: Juliet'
if [[ -n $have_transformers && -f $SHAKESPEARE ]] && "$PY" -c "import tokenizers" >/dev/null 2>&1; then
  head -c 100000 "$SHAKESPEARE" >"$WORK/qwen_text.txt"
  run_cmd qwen_tok "$PY" "$TOKREF" make-normalized "$WORK/qwen_text.txt" "$WORK/qwen_tok"
  run_cmd qwen_make "$PY" "$FAMREF" make qwen3 "$WORK/qwen" --vocab 1088 --seed 3 --tokens "1,2,3,4"
  cp "$WORK/qwen_tok/nfc/tokenizer.json" "$WORK/qwen/" 2>/dev/null
  # qwen_same NAME DIR: our greedy ids from DIR against transformers'; $WORK/NAME.same says "equal" or both.
  qwen_same() {
    echo "not compared" >"$WORK/$1.same"
    run_cmd "$1_ref" "$PY" "$FAMREF" greedy-text "$2" --prompt "$QWEN_PROMPT" --max-new-tokens 8
    expect_ok "$1_ours" generate --checkpoint "$2" --prompt "$QWEN_PROMPT" --max-new-tokens 8 --temperature 0 \
      --print-ids "${CPU[@]}" || return 0
    "$PY" -c "
import json, sys
want = json.load(open(sys.argv[1]))['ids'][0]
got = [int(t) for t in open(sys.argv[2]).read().split('\\n')[-2].split()]
print('equal' if got == want else f'ours {got} transformers {want}')" "$WORK/$1_ref.out" "$WORK/$1_ours.out" \
      >"$WORK/$1.same" 2>&1
  }
  qwen_same qwen_gen "$WORK/qwen"
  check "greedy ids of an imported Qwen3 with its tokenizer.json equal transformers' ($(cat "$WORK/qwen_gen.same"))" \
    grep -qx equal "$WORK/qwen_gen.same"
  if expect_ok qwen_train train "$WORK/qwen_text.txt" --init-from "$WORK/qwen" --steps 3 --batch-size 2 --seq-len 16 \
       --eval-every 0 --threads 1 "${CPU[@]}" --out "$WORK/qwen_run"; then
    check "text trains with the imported folder's tokenizer.json" grep -q "hf tokenizer" "$WORK/qwen_train.out"
    if expect_ok qwen_eval eval --checkpoint "$WORK/qwen_run" --val "$WORK/qwen_text.txt" --eval-steps 1 --batch-size 2 \
         --seq-len 16 "${CPU[@]}"; then
      check "eval --val encodes text with it" grep -q "^val loss: " "$WORK/qwen_eval.out"
    fi
    if expect_ok qwen_export export --checkpoint "$WORK/qwen_run" --out "$WORK/qwen_hf"; then
      check "export writes the folder's tokenizer.json" cmp -s "$WORK/qwen/tokenizer.json" "$WORK/qwen_hf/tokenizer.json"
      qwen_same qwen_gen_hf "$WORK/qwen_hf"
      check "the trained Qwen3's greedy ids equal transformers' on its export ($(cat "$WORK/qwen_gen_hf.same"))" \
        grep -qx equal "$WORK/qwen_gen_hf.same"
    fi
  fi
else
  skip "an imported Qwen3 with its tokenizer.json (needs transformers, tokenizers and $SHAKESPEARE)"
fi

# --- an --out that holds a run ----------------------------------------------------------------------
if [[ -f $WORK/char/metrics.jsonl ]]; then
  before=$(cksum <"$WORK/char/metrics.jsonl")
  expect_bad_input fresh_into_old_run "--out '$WORK/char' holds an earlier run.*--resume auto.*--overwrite" "" \
    train "$CHAR_TEXT" "${TINY[@]}" --steps 6 --out "$WORK/char"
  check "... and leaves its metrics untouched" test "$before" = "$(cksum <"$WORK/char/metrics.jsonl")"
  # A folder holding only a checkpoint under the name of builds before .safetensors is an earlier run too.
  mkdir -p "$WORK/old_name_run"
  cp "$WORK/char/ckpt_00000006.safetensors" "$WORK/old_name_run/ckpt_00000006.pt"
  expect_bad_input fresh_into_old_name "--out '$WORK/old_name_run' holds an earlier run \(ckpt_00000006.pt\)" "" \
    train "$CHAR_TEXT" "${TINY[@]}" --steps 6 --out "$WORK/old_name_run"
  cp "$WORK/char/ckpt_00000006.safetensors" "$WORK/char/ckpt_00000004.pt"
  if expect_ok overwrite_run train "$CHAR_TEXT" "${TINY[@]}" --steps 3 --out "$WORK/char" --overwrite; then
    check "--overwrite deletes the earlier run's checkpoints, old names too" \
      test ! -e "$WORK/char/ckpt_00000006.safetensors" -a ! -e "$WORK/char/ckpt_00000004.pt" \
      -a -e "$WORK/char/ckpt_00000003.safetensors"
  fi
  if expect_ok resume_named train "$CHAR_TEXT" "${TINY[@]}" --steps 6 --out "$WORK/char" --resume auto; then
    check "--resume names the checkpoint it loaded" grep -q "resumed from $WORK/char/ckpt_00000003.safetensors at step 3" "$WORK/resume_named.out"
  fi
fi

# --- eval --val on a shard folder scores its *val* files only ----------------------------------------
mkdir -p "$WORK/shards"
ids=$(seq 0 400 | awk '{ printf "%d ", ($1 * 31 + 7) % 60 }')
# shellcheck disable=SC2086
write_tokens "$WORK/shards/data_train_000000.bin" $ids
# shellcheck disable=SC2086
write_tokens "$WORK/shards/data_val_000000.bin" $ids
if expect_ok shard_train train "$WORK/shards" --vocab-size 64 "${TINY[@]}" --steps 6 --out "$WORK/shard_run"; then
  if expect_ok eval_shards eval --checkpoint "$WORK/shard_run" --val "$WORK/shards" --eval-steps 1 --batch-size 2 "${CPU[@]}"; then
    check "eval --val DIR names the val shard it scored" grep -q "data_val_000000.bin" "$WORK/eval_shards.out"
    check "... and not the train shard" bash -c "! grep -q data_train_000000.bin '$WORK/eval_shards.out'"
  fi
  rm "$WORK/shards/data_val_000000.bin"
  expect_bad_input eval_no_val_shard "holds no \*val\* files" "" eval --checkpoint "$WORK/shard_run" --val "$WORK/shards" "${CPU[@]}"
fi

# --- flags that would have no effect --------------------------------------------------------------
expect_bad_input eval_steps_without_eval "--eval-steps has no effect with --eval-every 0" "$WORK/noeffect" \
  train "$CHAR_TEXT" "${TINY[@]}" --eval-steps 5 --out "$WORK/noeffect"
expect_bad_input hellaswag_every_alone "--hellaswag-every has no effect without --hellaswag" "$WORK/noeffect" \
  train "$CHAR_TEXT" "${TINY[@]}" --hellaswag-every 5 --out "$WORK/noeffect"
if [[ -n $have_bpe ]]; then
  if expect_ok vocab_implies_gpt2 train "$CHAR_TEXT" "${TINY[@]}" --vocab "$GPT2_DIR" --steps 1 --out "$WORK/bpe_text"; then
    check "text with --vocab is tokenized with GPT-2's BPE" grep -q "gpt2 tokenizer" "$WORK/vocab_implies_gpt2.out"
  fi
  expect_bad_input vocab_with_char "--vocab" "$WORK/vocab_char" train "$CHAR_TEXT" "${TINY[@]}" --tokenizer char --vocab "$GPT2_DIR" --out "$WORK/vocab_char"
else
  skip "--vocab implies the GPT-2 tokenizer (needs $GPT2_DIR)"
fi

# --- the presets' recipes and the AdamW flags ------------------------------------------------------
run help train --help
check "--help shows shakespeare-char's beta2 0.99" grep -qE -- "--beta2 .*\[shakespeare-char: 0.99\]" <(tr -s ' \n' ' ' <"$WORK/help.out")
if expect_ok no_bias train "$CHAR_TEXT" "${TINY[@]}" --bias false --steps 2 --out "$WORK/nobias"; then
  run nobias_export export --checkpoint "$WORK/nobias" --out "$WORK/nobias_hf"
  check "a model without biases trains and exports (exit $RC)" test "$RC" -eq 0
fi
finish
