#!/usr/bin/env bash
# `mygpt-ddp tokenizer train` and `tokenizer eval` from the command line: a tokenizer trained on Tiny
# Shakespeare drives prepare -> train -> generate -> export, transformers' AutoTokenizer loads the export
# and gives the ids tokenizers gives on the trained tokenizer.json; the merges equal rustbpe's on the same
# JSON-lines corpus (the doc cap and character budget included) and on CRLF and CJK text read in pieces; a
# folder or glob of Parquet shards with --text-column trains as the JSON lines of its files but the last; eval
# prints bytes per token beside GPT-2's; bad inputs exit 2 with one line and leave no file.
#   tokenizer_train_test.sh MYGPT_DDP DATA_DIR PYTHON
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
DATA_DIR=$(test_data_dir "${2:-}")
PY=${3:-python3}
make_work_dir tokenizer_train
SHAKESPEARE=$DATA_DIR/tinyshakespeare.txt
REF=$TESTS_DIR/bpe_trainer_reference.py
CPU=(--device cpu)
if [[ ! -f $SHAKESPEARE ]]; then
  # Without the shared data: a text of our own (the rustbpe comparison still has its corpus).
  SHAKESPEARE=$WORK/text.txt
  for i in $(seq 400); do echo "First Citizen: we are accounted poor citizens, the patricians good $i."; echo; done >"$SHAKESPEARE"
fi

# --- the road: train a tokenizer, prepare shards with it, pretrain, generate, export ------------------
TOK=$WORK/tok
if expect_ok train_tok tokenizer train --input "$SHAKESPEARE" --vocab-size 512 --out "$TOK" --special nanochat --threads 2; then
  check "tokenizer train writes tokenizer.json and tokenizer_config.json" test -s "$TOK/tokenizer.json" -a -s "$TOK/tokenizer_config.json"
  check "tokenizer train reports its merges (247 = 512 - 256 bytes - 9 special tokens)" grep -q "^trained 247 merges" "$WORK/train_tok.out"
  if expect_ok prep prepare --input "$SHAKESPEARE" --vocab "$TOK" --out "$WORK/shards" --val-tokens 4096 --shard-tokens 100000; then
    check "prepare takes the trained tokenizer's folder as --vocab" test -s "$WORK/shards/tokenizer.json"
    if expect_ok pretrain train "$WORK/shards" --preset tiny --batch-size 4 --seq-len 32 --steps 3 --eval-every 0 \
         --out "$WORK/run" "${CPU[@]}"; then
      if expect_ok gen generate --checkpoint "$WORK/run" --prompt "ROMEO:" --max-new-tokens 5 "${CPU[@]}"; then
        check "generate encodes and decodes with the trained tokenizer" grep -q "^ROMEO:" "$WORK/gen.out"
      fi
      if expect_ok export export --checkpoint "$WORK/run" --out "$WORK/hf"; then
        check "export carries the trained tokenizer.json" cmp -s "$TOK/tokenizer.json" "$WORK/hf/tokenizer.json"
        if "$PY" -c "import transformers, tokenizers" >/dev/null 2>&1; then
          run_cmd auto "$PY" - "$WORK/hf" "$TOK/tokenizer.json" "$SHAKESPEARE" <<'PY'
import sys
from tokenizers import Tokenizer
from transformers import AutoTokenizer
auto = AutoTokenizer.from_pretrained(sys.argv[1])
tok = Tokenizer.from_file(sys.argv[2])
text = open(sys.argv[3], encoding="utf-8").read()[:20000] + "<|bos|>It's 1234 o'clock<|assistant_end|>"
a, b = auto(text, add_special_tokens=False)["input_ids"], tok.encode(text, add_special_tokens=False).ids
assert a == b, "ids differ"
assert auto.decode(a) == text
print(len(a), "ids equal")
PY
          check "AutoTokenizer loads the export with the trained tokenizer: $(cat "$WORK/auto.out")" test "$RC" -eq 0
        else
          skip "AutoTokenizer on the export (needs transformers)"
        fi
      fi
    fi
  fi
  # eval: bytes per token beside GPT-2's.
  if [[ -f $DATA_DIR/gpt2/encoder.json ]]; then
    if expect_ok eval_tok tokenizer eval --vocab "$TOK" --input "$SHAKESPEARE" --gpt2-vocab "$DATA_DIR/gpt2"; then
      check "tokenizer eval prints bytes per token for ours and GPT-2's" \
        bash -c "grep -qE '^gpt2 +50257 ' '$WORK/eval_tok.out' && grep -qE '^ours +512 ' '$WORK/eval_tok.out' && grep -q 'fewer tokens than gpt2' '$WORK/eval_tok.out'"
    fi
  fi
fi

# --- the same merges as rustbpe from the command line (JSON lines, --doc-cap, --max-chars, a regex) ----
# same_as_rustbpe NAME TOKENIZER_JSON RANKS_JSON: whether the tokens from id 256 are the bytes rustbpe learned.
same_as_rustbpe() {
  run_cmd "same_$1" "$PY" "$REPO_DIR/scripts/bench/compare_trained_ranks.py" "$2" "$3"
}

if "$PY" -c "import rustbpe" >/dev/null 2>&1; then
  "$PY" - "$SHAKESPEARE" "$WORK/docs.jsonl" "$WORK/docs.json" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
docs = [d for d in text.split("\n\n") if d]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")
# nanochat's tok_train with doc_cap 120 and max_chars 300000, for rustbpe.
out, n = [], 0
for d in docs:
    d = d[:120]
    n += len(d)
    out.append(d)
    if n > 300000:
        break
json.dump(out, open(sys.argv[3], "w", encoding="utf-8"))
PY
  CUSTOM="'s|'t| ?\\p{L}+| ?\\p{N}| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
  for pattern in nanochat "$CUSTOM"; do
    name=$([[ $pattern == nanochat ]] && echo nanochat || echo regex)
    if expect_ok "jsonl_$name" tokenizer train "$WORK/docs.jsonl" --vocab-size 1000 --special "<|endoftext|>" \
         --doc-cap 120 --max-chars 300000 --pattern "$pattern" --out "$WORK/jsonl_$name" --quiet; then
      regex=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['pre_tokenizer']['pretokenizers'][0]['pattern']['Regex'])" "$WORK/jsonl_$name/tokenizer.json")
      "$PY" -c "import json,sys; json.dump([{'docs': sys.argv[1], 'vocab': 999, 'pattern': sys.argv[2]}], open(sys.argv[3], 'w'))" \
        "$WORK/docs.json" "$regex" "$WORK/jobs_$name.json"
      run_cmd "ref_$name" "$PY" "$REF" rustbpe "$WORK/jobs_$name.json" "$WORK/ranks_$name.json"
      same_as_rustbpe "$name" "$WORK/jsonl_$name/tokenizer.json" "$WORK/ranks_$name.json"
      check "tokenizer train --pattern $name on JSON lines with --doc-cap/--max-chars: rustbpe's merges ($(cat "$WORK/same_$name.out"))" test "$RC" -eq 0
    fi
  done
  # A text file is read in pieces cut after a '\n' between printable characters, where GPT-4's pattern ends
  # a chunk anyway: the same merges as rustbpe on the whole text as one document.
  if expect_ok text_gpt4 tokenizer train "$SHAKESPEARE" --vocab-size 1000 --special "<|endoftext|>" --out "$WORK/text_gpt4" --quiet; then
    regex=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['pre_tokenizer']['pretokenizers'][0]['pattern']['Regex'])" "$WORK/text_gpt4/tokenizer.json")
    "$PY" -c "import json,sys; json.dump([open(sys.argv[1], encoding='utf-8').read()], open(sys.argv[2], 'w'))" "$SHAKESPEARE" "$WORK/whole.json"
    "$PY" -c "import json,sys; json.dump([{'docs': sys.argv[1], 'vocab': 999, 'pattern': sys.argv[2]}], open(sys.argv[3], 'w'))" \
      "$WORK/whole.json" "$regex" "$WORK/jobs_text.json"
    run_cmd ref_text "$PY" "$REF" rustbpe "$WORK/jobs_text.json" "$WORK/ranks_text.json"
    same_as_rustbpe text "$WORK/text_gpt4/tokenizer.json" "$WORK/ranks_text.json"
    check "tokenizer train on a text file (read in pieces), GPT-4's pattern: rustbpe's merges on the whole text ($(cat "$WORK/same_text.out"))" test "$RC" -eq 0
  fi
else
  skip "merges against rustbpe from the command line (needs rustbpe)"
fi

# --- CRLF and CJK text, read in pieces cut at their line ends: rustbpe's merges on the whole text ------------
# GPT-2's pattern restarts between the '\r' and the '\n' of a CRLF, GPT-4's after it (tokenizer/line_cuts.h): the
# text (over 3 MiB: pieces of 1 MiB) is cut at each pattern's own places.
if "$PY" -c "import rustbpe" >/dev/null 2>&1; then
  "$PY" - "$SHAKESPEARE" "$WORK/crlf_cjk.txt" "$WORK/crlf_cjk.json" <<'PY'
import json, random, sys
text = open(sys.argv[1], encoding="utf-8").read().replace("\n", "\r\n")
rng = random.Random(7)
words = ["中文", "汉字", "测试", "你好", "世界", "日本語", "ひらがな", "カタカナ", "한국어", "東京", "。", "、", "「", "」", "！"]
cjk = "".join("".join(rng.choice(words) for _ in range(rng.randint(1, 12))) + rng.choice(["\n", "\r\n"])
              for _ in range(30000))
whole = text + cjk + text + cjk
open(sys.argv[2], "w", encoding="utf-8", newline="").write(whole)
json.dump([whole], open(sys.argv[3], "w"))
PY
  for pattern in gpt4 gpt2; do
    if expect_ok "crlf_$pattern" tokenizer train "$WORK/crlf_cjk.txt" --vocab-size 800 --pattern "$pattern" \
         --special "<|endoftext|>" --out "$WORK/crlf_$pattern" --threads 2 --quiet; then
      regex=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['pre_tokenizer']['pretokenizers'][0]['pattern']['Regex'])" "$WORK/crlf_$pattern/tokenizer.json")
      "$PY" -c "import json,sys; json.dump([{'docs': sys.argv[1], 'vocab': 799, 'pattern': sys.argv[2]}], open(sys.argv[3], 'w'))" \
        "$WORK/crlf_cjk.json" "$regex" "$WORK/jobs_crlf_$pattern.json"
      run_cmd "ref_crlf_$pattern" "$PY" "$REF" rustbpe "$WORK/jobs_crlf_$pattern.json" "$WORK/ranks_crlf_$pattern.json"
      same_as_rustbpe "crlf_$pattern" "$WORK/crlf_$pattern/tokenizer.json" "$WORK/ranks_crlf_$pattern.json"
      check "tokenizer train --pattern $pattern on CRLF and CJK text read in pieces: rustbpe's merges on the whole ($(cat "$WORK/same_crlf_$pattern.out"))" test "$RC" -eq 0
    fi
  done
else
  skip "CRLF and CJK text against rustbpe (needs rustbpe)"
fi

# --- Parquet: a folder or a quoted glob of shards (the last left out, as prepare validates on it), --text-column
if "$PY" -c "import pyarrow" >/dev/null 2>&1; then
  mkdir -p "$WORK/shards_pq"
  "$PY" - "$SHAKESPEARE" "$WORK/shards_pq" "$WORK/pq_train.jsonl" <<'PY'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
docs = [d for d in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if d]
third = len(docs) // 3
parts = [docs[:third], docs[third:2 * third], docs[2 * third:]]
for i, part in enumerate(parts):
    pq.write_table(pa.table({"id": list(range(len(part))), "content": part}), f"{sys.argv[2]}/shard_{i:02d}.parquet",
                   row_group_size=500)
with open(sys.argv[3], "w", encoding="utf-8") as f:
    for d in parts[0] + parts[1]:  # what a tokenizer trained on the folder sees: all but its last file
        f.write(json.dumps({"text": d}) + "\n")
PY
  expect_ok pq_jsonl tokenizer train "$WORK/pq_train.jsonl" --vocab-size 400 --out "$WORK/pq_jsonl" --quiet
  for given in folder glob; do
    input=$([[ $given == folder ]] && echo "$WORK/shards_pq" || echo "$WORK/shards_pq/shard_*.parquet")
    if expect_ok "pq_$given" tokenizer train --input "$input" --text-column content --vocab-size 400 --out "$WORK/pq_$given" --quiet; then
      check "tokenizer train on a $given of Parquet shards names the last file, left out" \
        grep -q "^left out: $WORK/shards_pq/shard_02.parquet (the last of 3 files" "$WORK/pq_$given.out"
      check "tokenizer train on a $given of Parquet shards (--text-column content): the tokenizer of the JSON lines of its first two files" \
        cmp -s "$WORK/pq_jsonl/tokenizer.json" "$WORK/pq_$given/tokenizer.json"
    fi
  done
  expect_bad_input bad_column "shard_00\.parquet' has no column 'text' \(--text-column\); its columns: id, content" "$WORK/bad" \
    tokenizer train --input "$WORK/shards_pq/shard_00.parquet" --vocab-size 300 --out "$WORK/bad"
  expect_bad_input bad_glob "--input '$WORK/nothing_\*\.parquet' matches no file" "$WORK/bad" \
    tokenizer train --input "$WORK/nothing_*.parquet" --vocab-size 300 --out "$WORK/bad"
else
  skip "tokenizer train on Parquet shards (needs pyarrow)"
fi

# --- bad inputs: one line, exit 2, nothing written -----------------------------------------------------
expect_bad_input bad_vocab "--vocab-size 260 is below 256 bytes \+ 9 special token\(s\) = 265" "$WORK/bad" \
  tokenizer train --input "$SHAKESPEARE" --vocab-size 260 --special nanochat --out "$WORK/bad"
expect_bad_input bad_pattern "--pattern.*does not compile" "$WORK/bad" \
  tokenizer train --input "$SHAKESPEARE" --vocab-size 300 --pattern "(\\p{L}" --out "$WORK/bad"
: >"$WORK/empty.txt"
expect_bad_input bad_empty "empty\.txt" "$WORK/bad" tokenizer train --input "$WORK/empty.txt" --vocab-size 300 --out "$WORK/bad"
printf '{"text": ""}\n' >"$WORK/empty_docs.jsonl"
expect_bad_input bad_empty_docs "no text to train on" "$WORK/bad" \
  tokenizer train --input "$WORK/empty_docs.jsonl" --vocab-size 300 --out "$WORK/bad"
printf 'caf\xe9 latin-1\n' >"$WORK/latin1.txt"
expect_bad_input bad_utf8 "latin1\.txt.*not UTF-8" "$WORK/bad" \
  tokenizer train --input "$WORK/latin1.txt" --vocab-size 300 --out "$WORK/bad"
expect_bad_input bad_twice "given twice" "$WORK/bad" \
  tokenizer train --input "$SHAKESPEARE" --vocab-size 300 --special "<|a|>" --special "<|a|>" --out "$WORK/bad"
expect_bad_input bad_subcommand "'tokenizer' needs one of: train, eval" "" tokenizer
if [[ -s $TOK/tokenizer.json ]]; then
  cp "$TOK/tokenizer.json" "$WORK/before.json"
  expect_bad_input bad_overwrite "--out '$TOK' holds a tokenizer \(tokenizer.json\).*--overwrite" "" \
    tokenizer train --input "$SHAKESPEARE" --vocab-size 300 --out "$TOK"
  check "a refused tokenizer train leaves the folder's tokenizer as it was" cmp -s "$WORK/before.json" "$TOK/tokenizer.json"
  if expect_ok overwrite tokenizer train --input "$SHAKESPEARE" --vocab-size 300 --out "$TOK" --overwrite --quiet; then
    check "--overwrite replaces the tokenizer, with no staging folder left" \
      bash -c "! cmp -s '$WORK/before.json' '$TOK/tokenizer.json' && [[ -z \$(ls -A '$TOK' | grep -v '^tokenizer') ]]"
  fi
fi
finish
