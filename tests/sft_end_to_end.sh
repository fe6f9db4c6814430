#!/usr/bin/env bash
# `train --sft` end to end (issue 42): conversations in both record shapes train with the loss over the
# assistant's tokens (progress and metrics count those), held-out conversations give a validation loss,
# long conversations are cut with a note, the checkpoint records the chat template and tokens, a model
# fine-tunes from --init-from; bad records are one line naming the file and line, exit 2, or skipped and
# counted with --skip-bad-records; a run stopped by SIGTERM resumes to the same losses, bit for bit.
#
# An imported Hugging Face GPT-2 of 50257 rows grows rows for the chat tokens, fine-tunes, and its export
# gives in transformers the greedy replies that `chat` gives.
#
# usage: sft_end_to_end.sh PATH/TO/mygpt-ddp SHARED_DATA_DIR [PYTHON_WITH_TRANSFORMERS]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTS_DIR/chat_fixture.sh"

use_binary "${1:-}"
vocab=$(test_data_dir "${2:-}")/gpt2
PY=${3:-python3}
make_work_dir sft
if [[ ! -f $vocab/encoder.json ]]; then
  skip "GPT-2's tokenizer files are not in $vocab (see README)"
  echo "$passed passed, $failed failed, $skipped skipped"
  exit 0
fi

chat=$WORK/chat.jsonl
write_conversations "$chat" 200 5
small=(--preset tiny --block-size 48 --batch-size 4 --lr 3e-3 --warmup-steps 2 --seed 7 --threads 1 --device cpu)

# --- training, validation, notes, the checkpoint's record ---------------------------------------------
if expect_ok sft train "$chat" --sft --vocab "$vocab" "${small[@]}" --steps 20 --eval-every 10 --eval-steps 2 \
     --log-every 5 --out "$WORK/sft"; then
  out=$WORK/sft.out
  check "data line names the conversations: $(grep -m1 '^data:' "$out")" grep -q "^data: conversations .*180 to train on, 20 held out" "$out"
  check "a validation loss on held-out conversations: $(grep -m1 'val loss' "$out")" grep -q "val loss: [0-9]" "$out"
  tokens_per_step=$((4 * 48))
  trained=$(metric_values trained_tokens "$WORK/sft/metrics.jsonl" | head -1)
  check "a step counts its assistant tokens, not every position ($trained of $tokens_per_step)" \
    awk -v t="${trained:-0}" -v all="$tokens_per_step" 'BEGIN { exit !(t > 0 && t < all) }'
  first=$(metric_values loss "$WORK/sft/metrics.jsonl" | head -1)
  last=$(metric_values loss "$WORK/sft/metrics.jsonl" | tail -1)
  check "the loss falls ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
  ckpt=$WORK/sft/ckpt_00000020.safetensors
  check "the checkpoint records the chat template and tokens" \
    bash -c "head -c 200000 '$ckpt' | grep -aq 'nanochat.*<|assistant_end|>.*50261'"
fi

# A conversation longer than the block: cut, with one note.
{ cat "$chat"; printf '{"prompt":"%s","completion":"ok"}\n' "$(printf 'word %.0s' $(seq 60))"; } >"$WORK/long.jsonl"
if expect_ok long train "$WORK/long.jsonl" --sft --vocab "$vocab" "${small[@]}" --steps 2 --eval-every 0 \
     --val-fraction 0 --out "$WORK/long_out"; then
  check "a long conversation is cut with a note: $(grep -m1 'were cut' "$WORK/long.out")" \
    grep -q "note: training conversations: 1 conversation(s) longer than --seq-len 48 + 1 tokens were cut" "$WORK/long.out"
fi

# Fine-tuning a trained model: its weights and its tokenizer (no --vocab needed).
if [[ -f ${ckpt:-} ]] && expect_ok finetune train "$chat" --sft --init-from "$ckpt" --batch-size 4 --steps 3 \
     --threads 1 --device cpu --eval-every 0 --out "$WORK/finetune"; then
  check "--init-from fine-tunes the stored model" grep -q "^weights: " "$WORK/finetune.out"
fi

# export: the chat tokens' rows, and the template and tokens in tokenizer_config.json (transformers'
# apply_chat_template on such a folder is checked against our ids in tests/test_chat_format.cpp).
if [[ -f ${ckpt:-} ]] && expect_ok export export --checkpoint "$ckpt" --out "$WORK/exported"; then
  check "export keeps the 5 chat tokens' rows (50262) and says so: $(tail -1 "$WORK/export.out")" \
    bash -c "grep -q '\"vocab_size\": 50262' '$WORK/exported/config.json' && grep -q 'chat template' '$WORK/export.out'"
  check "export writes the chat template and the tokens into tokenizer_config.json" \
    bash -c "grep -q 'chat_template' '$WORK/exported/tokenizer_config.json' && grep -q '\"50261\"' '$WORK/exported/tokenizer_config.json'"
fi

# --- an imported Hugging Face GPT-2 (50257 rows, none spare): grown, fine-tuned, judged by transformers ---
if ! "$PY" -c "import transformers" 2>/dev/null; then
  skip "Hugging Face GPT-2 fine-tuning (no transformers in $PY)"
# The folder as the Hub has it: config.json, model.safetensors, tokenizer.json, vocab.json, merges.txt.
elif "$PY" "$TESTS_DIR/hf_reference.py" make "$WORK/hf_gpt2" --vocab 50257 --seed 3 --tokens "1,2,3" >/dev/null &&
     "$PY" "$TESTS_DIR/tokenizer_reference.py" make-gpt2 "$vocab" "$WORK/hf_tokenizer" >/dev/null &&
     cp "$WORK/hf_tokenizer/tokenizer.json" "$WORK/hf_gpt2/" && cp "$vocab/encoder.json" "$WORK/hf_gpt2/vocab.json" &&
     cp "$vocab/vocab.bpe" "$WORK/hf_gpt2/merges.txt" &&
     expect_ok hf_sft train "$chat" --sft --init-from "$WORK/hf_gpt2" --batch-size 8 --seq-len 32 \
       --steps 150 --lr 3e-3 --warmup-steps 5 --eval-every 0 --checkpoint-every 30 --keep-checkpoints 0 --threads 1 \
       --device cpu --out "$WORK/hf_sft"; then
  check "the 50257-row model grows rows for the chat tokens, and says so: $(grep -m1 '^vocabulary:' "$WORK/hf_sft.out")" \
    grep -q "^vocabulary: grew the model's 50257 token rows to 50304 .*chat tokens 50257\.\.50261" "$WORK/hf_sft.out"
  system="You reverse words."
  printf '%s\n' "abc" "reverse hello" "please reverse the word cat for me" "a question it never saw" >"$WORK/prompts.txt"
  # Step 30 replies run to --max-new-tokens; by step 150 they end at <|assistant_end|> (short or empty).
  for step in 30 150; do
    ckpt_hf=$WORK/hf_sft/ckpt_$(printf '%08d' "$step").safetensors
    if expect_ok "hf_export_$step" export --checkpoint "$ckpt_hf" --out "$WORK/hf_exported_$step" &&
       "$BIN" chat --checkpoint "$ckpt_hf" --temperature 0 --max-new-tokens 16 --system "$system" \
         <"$WORK/prompts.txt" >"$WORK/hf_replies_$step.txt" 2>"$WORK/hf_chat_$step.err"; then
      check "step $step: transformers' greedy replies on the export equal chat's: $(head -c 160 "$WORK/hf_replies_$step.txt")" \
        "$PY" "$TESTS_DIR/chat_reply_reference.py" "$WORK/hf_exported_$step" "$system" 16 "$WORK/prompts.txt" \
        "$WORK/hf_replies_$step.txt"
    else
      check "chat answers the fine-tuned Hugging Face model at step $step: $(tail -2 "$WORK/hf_chat_$step.err")" false
    fi
  done
fi

# --- bad records and options ---------------------------------------------------------------------------
bad=$WORK/bad.jsonl
{
  head -2 "$chat"
  echo '{"messages":[{"role":"robot","content":"beep"},{"role":"assistant","content":"x"}]}'
  echo '{"messages":[{"role":"user","content":"no reply"}]}'
  printf '{"prompt":"caf\xe9","completion":"x"}\n'
  echo '["not", "an object"]'
  echo '{"prompt": "unterminated'
  head -3 "$chat" | tail -1
} >"$bad"
bad_sft() {
  local name=$1 pattern=$2 file=$3
  printf '%s\n' "$(head -2 "$chat")" "$(sed -n "${4}p" "$bad")" >"$file"
  expect_bad_input "$name" "$pattern" "$WORK/o_$name" train "$file" --sft --vocab "$vocab" "${small[@]}" --steps 2 \
    --out "$WORK/o_$name"
}
bad_sft unknown_role "unknown_role\.jsonl:3: message 1 has unknown role 'robot'" "$WORK/unknown_role.jsonl" 3
bad_sft no_assistant "no_assistant\.jsonl:3: the conversation has no assistant turn" "$WORK/no_assistant.jsonl" 4
bad_sft not_utf8 "not_utf8\.jsonl:3: not UTF-8" "$WORK/not_utf8.jsonl" 5
bad_sft not_object "not_object\.jsonl:3: not a JSON object" "$WORK/not_object.jsonl" 6
bad_sft bad_json "bad_json\.jsonl:3: not JSON" "$WORK/bad_json.jsonl" 7
if expect_ok skipped train "$bad" --sft --skip-bad-records --vocab "$vocab" "${small[@]}" --steps 2 --eval-every 0 \
     --val-fraction 0 --out "$WORK/skipped"; then
  check "--skip-bad-records: one note counting them: $(grep 'bad record' "$WORK/skipped.out")" \
    test "$(grep -c 'note: skipped 5 bad record(s) of 8 (--skip-bad-records)' "$WORK/skipped.out")" -eq 1
fi
expect_bad_input skip_without_sft "--skip-bad-records.*without --sft" "" train builtin:sort --skip-bad-records \
  --steps 1 --out "$WORK/o_skip"
expect_bad_input sft_char "--sft needs a BPE tokenizer" "" train "$chat" --sft --tokenizer char --steps 1 \
  --out "$WORK/o_char"

# --- SIGTERM mid-run, then --resume auto: the same losses as a run straight through ---------------------
S=150
resume_args=(train "$chat" --sft --vocab "$vocab" "${small[@]}" --steps $S --eval-every 50 --eval-steps 2
             --log-every 1 --dropout 0.1)
if expect_ok straight "${resume_args[@]}" --out "$WORK/straight"; then
  "$BIN" "${resume_args[@]}" --out "$WORK/stopped" >"$WORK/stopped.out" 2>"$WORK/stopped.err" &
  pid=$!
  for _ in $(seq 600); do grep -qE '^step +3 \| loss' "$WORK/stopped.out" && break; sleep 0.05; done
  kill -TERM $pid
  wait $pid
  rc=$?
  at=$(ls "$WORK/stopped" | sed -n 's/^ckpt_0*\([0-9][0-9]*\)\.safetensors$/\1/p' | head -1)
  if [[ $rc -ne 0 || -z $at ]] || ! grep -q "stopped early" "$WORK/stopped.out"; then
    fail "SIGTERM mid-run: a checkpoint and exit 0" "exit $rc, checkpoint at '${at}'"
  elif [[ $at -ge $S ]]; then
    fail "SIGTERM mid-run: the run finished before the signal (make S larger)"
  else
    run resumed "${resume_args[@]}" --resume auto --out "$WORK/stopped"
    a=$(metric_values loss "$WORK/straight/metrics.jsonl")
    b=$(metric_values loss "$WORK/stopped/metrics.jsonl")
    if [[ $RC -ne 0 ]]; then
      fail "resume after SIGTERM" "exit $RC: $(tail -c 300 "$WORK/resumed.err")"
    elif [[ $a != "$b" || $(grep -c . <<<"$b") -ne $S ]]; then
      fail "resume after SIGTERM at step $at: losses differ" "$(diff <(echo "$a") <(echo "$b") | head -4 | tr '\n' ' ')"
    elif [[ $(metric_values val_loss "$WORK/straight/metrics.jsonl") != "$(metric_values val_loss "$WORK/stopped/metrics.jsonl")" ]]; then
      fail "resume after SIGTERM: validation losses differ"
    else
      pass "SIGTERM at step $at, --resume auto: all $S losses (and validation losses) bit-identical to a run straight through"
    fi
  fi
fi
finish
