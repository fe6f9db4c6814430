#!/usr/bin/env bash
# A chat model stays a chat model in every form (issue 53): checkpoint -> export -> re-export keeps the
# chat rows (50262), tokens and template, and `chat` on the re-export answers as on the checkpoint; the
# export's eos is <|assistant_end|> (config.json, generation_config.json), so transformers' generate()
# stops there by itself; `generate` prints chat tokens as their names; `eval` scores held-out
# conversations as training does, the chat rows in the softmax, the same on the checkpoint and its export.
# A tokenizer.json with chat tokens of its own (nanochat's) trains with --sft on those ids, and its export
# gives in transformers the greedy replies `chat` gives. Misleading words: a token file given to --sft,
# conversations scored as text, the data line's count of conversations left out.
#
# usage: chat_round_trip_test.sh PATH/TO/mygpt-ddp SHARED_DATA_DIR [PYTHON_WITH_TRANSFORMERS]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTS_DIR/chat_fixture.sh"

use_binary "${1:-}"
vocab=$(test_data_dir "${2:-}")/gpt2
PY=${3:-python3}
make_work_dir chat_round_trip
if [[ ! -f $vocab/encoder.json ]]; then
  skip "GPT-2's tokenizer files are not in $vocab (see README)"
  echo "$passed passed, $failed failed, $skipped skipped"
  exit 0
fi
have_transformers=0
"$PY" -c "import transformers" 2>/dev/null && have_transformers=1

chat=$WORK/chat.jsonl
held=$WORK/held.jsonl
write_conversations "$chat" 200 5
write_conversations "$held" 16 11
small=(--preset tiny --block-size 48 --batch-size 4 --lr 3e-3 --warmup-steps 5 --seed 7 --threads 1 --device cpu)
quick=(--preset tiny --block-size 48 --batch-size 4 --lr 3e-3 --warmup-steps 0 --seed 7 --threads 1 --device cpu)
printf '%s\n' "reverse abc" "please reverse the word dog for me" "xyz" >"$WORK/prompts.txt"

# --- a GPT-2-tokenizer chat model: checkpoint, export, re-export ----------------------------------------
if expect_ok sft train "$chat" --sft --vocab "$vocab" "${small[@]}" --steps 150 --val-data "$held" --eval-every 150 \
     --eval-steps 4 --out "$WORK/sft"; then
  ckpt=$WORK/sft/ckpt_00000150.safetensors
  trained_val=$(metric_values val_loss "$WORK/sft/metrics.jsonl" | tail -1)

  # eval: held-out conversations, scored as training scored them (the chat tokens are outputs too).
  if expect_ok eval_ckpt eval --checkpoint "$ckpt" --val "$held" --batch-size 4 --eval-steps 4 --threads 1 --device cpu; then
    ours=$(sed -n 's/^val loss: \([0-9.]*\).*/\1/p' "$WORK/eval_ckpt.out")
    check "eval --val conversations on the checkpoint: $ours, training's held-out loss $trained_val" \
      awk -v a="$ours" -v b="$trained_val" 'BEGIN { exit !(a != "" && (a - b) < 1e-4 && (b - a) < 1e-4) }'
  fi

  if expect_ok export export --checkpoint "$ckpt" --out "$WORK/exported" &&
     expect_ok reexport export --checkpoint "$WORK/exported" --out "$WORK/reexported"; then
    for folder in exported reexported; do
      check "$folder: 50262 rows, eos <|assistant_end|> (50261) in config.json and generation_config.json, the template" \
        bash -c "grep -q '\"vocab_size\": 50262' '$WORK/$folder/config.json' &&
                 grep -q '\"eos_token_id\": 50261' '$WORK/$folder/config.json' &&
                 grep -q '\"eos_token_id\": 50261' '$WORK/$folder/generation_config.json' &&
                 grep -q 'chat_template' '$WORK/$folder/tokenizer_config.json'"
    done
    check "the re-export says it carries the chat template: $(tail -1 "$WORK/reexport.out")" \
      grep -q "chat template and its 5 special tokens" "$WORK/reexport.out"
    check "the re-export's weights are the export's" cmp -s "$WORK/exported/model.safetensors" "$WORK/reexported/model.safetensors"

    run_cmd chat_ckpt "$BIN" chat --checkpoint "$ckpt" --temperature 0 --max-new-tokens 16 --threads 1 <"$WORK/prompts.txt"
    run_cmd chat_reexported "$BIN" chat --checkpoint "$WORK/reexported" --temperature 0 --max-new-tokens 16 --threads 1 \
      <"$WORK/prompts.txt"
    check "chat on the re-export: exit 0, the checkpoint's replies, no 'not fine-tuned' note (exit $RC): $(head -c 120 "$WORK/chat_reexported.out")" \
      bash -c "[[ $RC -eq 0 ]] && cmp -s '$WORK/chat_ckpt.out' '$WORK/chat_reexported.out' &&
               ! grep -q 'not fine-tuned' '$WORK/chat_reexported.err' && [[ -s '$WORK/chat_ckpt.out' ]]"

    if expect_ok eval_export eval --checkpoint "$WORK/reexported" --val "$held" --batch-size 4 --eval-steps 4 \
         --threads 1 --device cpu; then
      theirs=$(sed -n 's/^val loss: \([0-9.]*\).*/\1/p' "$WORK/eval_export.out")
      check "eval on the re-export gives the checkpoint's held-out loss ($theirs, $ours): one answer" test "$theirs" = "$ours"
    fi

    # generate: a chat token is printed as its name (GPT-2's tokenizer has no text for 50257..50261).
    gen=(generate --checkpoint "$WORK/reexported" --prompt "reverse abc" --temperature 0 --max-new-tokens 12 --threads 1)
    if expect_ok gen_ids "${gen[@]}" --print-ids && expect_ok gen_text "${gen[@]}"; then
      names=$(grep -oE '<\|(bos|user_start|user_end|assistant_start|assistant_end)\|>' "$WORK/gen_text.out" | wc -l)
      chat_ids=$(grep -oE '\b5026[01]\b|\b5025[789]\b' "$WORK/gen_ids.out" | wc -l)
      check "generate prints each chat token it draws as its name ($chat_ids drawn, $names printed)" \
        bash -c "[[ $chat_ids -gt 0 && $chat_ids -eq $names ]]"
    fi

    if [[ $have_transformers -eq 1 ]]; then
      # transformers' generate() with the folder's defaults stops at <|assistant_end|>, as chat does.
      check "transformers' generate() on the re-export stops at <|assistant_end|> by itself" "$PY" - "$WORK/reexported" <<'PY'
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder = sys.argv[1]
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
end = tok.convert_tokens_to_ids("<|assistant_end|>")
assert model.generation_config.eos_token_id == end, model.generation_config.eos_token_id
ids = tok.apply_chat_template([{"role": "user", "content": "reverse abc"}], add_generation_prompt=True, tokenize=True)
if isinstance(ids, dict) or hasattr(ids, "input_ids"):
    ids = ids["input_ids"]
prompt = torch.tensor([list(ids)])
with torch.no_grad():
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=40)
new = out[0, prompt.shape[1]:].tolist()
print("new ids:", new)
assert end in new and new[-1] == end and new.count(end) == 1, new
PY
    fi
  fi
fi

# --- a tokenizer.json with the chat tokens of its own (nanochat's names), at ids that are not the end ---
if [[ $have_transformers -eq 0 ]]; then
  skip "a tokenizer.json's own chat tokens (no transformers in $PY to build and judge it)"
elif "$PY" "$TESTS_DIR/tokenizer_reference.py" make-gpt2 "$vocab" "$WORK/gpt2_json" >/dev/null &&
     "$PY" - "$WORK/gpt2_json/tokenizer.json" "$WORK/nanochat_tok" <<'PY'
import json, os, sys
source, out = sys.argv[1], sys.argv[2]
with open(source, encoding="utf-8") as f:
    t = json.load(f)
names = ["<|python_start|>", "<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>"]
t["added_tokens"] += [{"id": 50257 + i, "content": n, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for i, n in enumerate(names)]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(t, f)
with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump({"bos_token": "<|bos|>", "tokenizer_class": "PreTrainedTokenizerFast"}, f)
PY
then
  if expect_ok own_sft train "$chat" --sft --vocab "$WORK/nanochat_tok" "${small[@]}" --steps 20 --eval-every 0 \
       --val-fraction 0 --out "$WORK/own"; then
    check "the data line names the tokenizer's own chat tokens: $(grep -m1 '^data:' "$WORK/own_sft.out")" \
      grep -q "^data: conversations .* | hf tokenizer with its own chat tokens, chat template 'nanochat'" "$WORK/own_sft.out"
    own_ckpt=$WORK/own/ckpt_00000020.safetensors
    check "the checkpoint records the tokenizer's ids (<|bos|> 50258 ... <|assistant_end|> 50262)" \
      bash -c "head -c 200000 '$own_ckpt' | grep -aq '<|bos|>[^0-9]*50258.*<|assistant_end|>[^0-9]*50262'"
    system="You reverse words."
    if expect_ok own_export export --checkpoint "$own_ckpt" --out "$WORK/own_exported" &&
       "$BIN" chat --checkpoint "$own_ckpt" --temperature 0 --max-new-tokens 16 --system "$system" --threads 1 \
         <"$WORK/prompts.txt" >"$WORK/own_replies.txt" 2>"$WORK/own_chat.err"; then
      check "transformers' greedy replies on its export equal chat's: $(head -c 160 "$WORK/own_replies.txt")" \
        "$PY" "$TESTS_DIR/chat_reply_reference.py" "$WORK/own_exported" "$system" 16 "$WORK/prompts.txt" \
        "$WORK/own_replies.txt"
      run_cmd own_chat_export "$BIN" chat --checkpoint "$WORK/own_exported" --temperature 0 --max-new-tokens 16 \
        --system "$system" --threads 1 <"$WORK/prompts.txt"
      check "chat on that export: the checkpoint's replies (exit $RC)" cmp -s "$WORK/own_replies.txt" "$WORK/own_chat_export.out"
    else
      fail "export and chat of the model with the tokenizer's own chat tokens" "$(tail -2 "$WORK/own_chat.err")"
    fi
  fi
  # GPT-2's tokenizer.json alone (no chat tokens, no vocab.json): the five after its ids, and its export
  # adds them to tokenizer.json, where AutoTokenizer reads them.
  if expect_ok json_sft train "$chat" --sft --vocab "$WORK/gpt2_json" "${quick[@]}" --steps 2 \
       --eval-every 0 --val-fraction 0 --out "$WORK/json" &&
     expect_ok json_export export --checkpoint "$WORK/json/ckpt_00000002.safetensors" --out "$WORK/json_exported"; then
    check "a tokenizer.json without chat tokens: --sft appends them (50257..50261) and the export adds them to tokenizer.json" \
      "$PY" - "$WORK/json_exported" <<'PY'
import sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
assert tok.convert_tokens_to_ids("<|bos|>") == 50257 and tok.convert_tokens_to_ids("<|assistant_end|>") == 50261
ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=True)
if isinstance(ids, dict) or hasattr(ids, "input_ids"):
    ids = ids["input_ids"]
assert list(ids)[:2] == [50257, 50258] and list(ids)[-1] == 50260, ids
PY
  fi
else
  fail "making a tokenizer.json with chat tokens of its own"
fi

# --- misleading words ------------------------------------------------------------------------------------
head -c 4096 /dev/urandom >"$WORK/tokens.bin"
expect_bad_input sft_token_file "tokens\.bin' is a token file" "$WORK/o_bin" train "$WORK/tokens.bin" --sft --vocab "$vocab" \
  "${small[@]}" --steps 1 --out "$WORK/o_bin"
if [[ -f $vocab/vocab.bpe ]]; then
  train_plain_model plain_model "$vocab" "$WORK/plain" "${quick[@]}" --steps 1
  if expect_ok eval_plain eval --checkpoint "$WORK/plain" --val "$held" --val-fraction 1 --batch-size 2 --seq-len 32 \
       --threads 1 --device cpu; then
    check "eval --val conversations on a model that is no chat model says they are scored as text" \
      grep -q "holds conversations, but .* is no chat model" "$WORK/eval_plain.out"
  fi
fi
# export's refusals name the flag that is the problem: a --vocab that is no tokenizer, or not the model's.
"$PY" -c "import sys; from array import array; array('H', [i % 300 for i in range(20000)]).tofile(open(sys.argv[1], 'wb'))" \
  "$WORK/small_vocab.bin"
if expect_ok small_vocab train "$WORK/small_vocab.bin" --vocab-size 300 --preset tiny --block-size 32 --steps 1 \
     --eval-every 0 --threads 1 --device cpu --out "$WORK/small_vocab_run"; then
  expect_bad_input export_vocab_too_big "^mygpt-ddp: error: --vocab .*gpt2: its tokenizer has 50257 tokens, more than the [0-9]+ of" \
    "" export --checkpoint "$WORK/small_vocab_run" --vocab "$vocab" --out "$WORK/o_vocab_big"
  expect_bad_input export_vocab_missing "^mygpt-ddp: error: --vocab.*absent" "" \
    export --checkpoint "$WORK/small_vocab_run" --vocab "$WORK/absent" --out "$WORK/o_vocab_absent"
fi
# Two conversations whose prompts fill the rows: left out, and not counted on the data line.
{ head -10 "$chat"; for _ in 1 2; do printf '{"prompt":"%s","completion":"ok"}\n' "$(printf 'word %.0s' $(seq 60))"; done; } \
  >"$WORK/left_out.jsonl"
if expect_ok left_out train "$WORK/left_out.jsonl" --sft --vocab "$vocab" "${quick[@]}" --steps 1 \
     --eval-every 0 \
     --val-fraction 0 --out "$WORK/left_out_run"; then
  check "the data line counts only the conversations trained on: $(grep -m1 '^data:' "$WORK/left_out.out")" \
    bash -c "grep -q '2 of them before any assistant token, so they are left out' '$WORK/left_out.out' &&
             grep -q '^data: conversations .* | 10 to train on, 0 held out' '$WORK/left_out.out'"
fi
finish
