#!/usr/bin/env bash
# `mygpt-ddp prepare --threads N` against tiktoken's encode_ordinary_batch(num_threads=N), side by side,
# on a FineWeb-shaped JSON-lines corpus (documents among metadata members) built from a text's paragraphs
# and HellaSwag's tasks, repeated to --mb MB,
# for N = 1 and 2 (and --threads-list): MB/s of each (ours: the whole command, read + tokenize + write;
# tiktoken: the encode call alone, its documents already in memory), the token counts (which must agree),
# whether our shards are byte-identical across N, and our peak RSS on the corpus and on a --big-mb MB one
# (flat memory: the corpus streams through). Prints the CPU model and appends to docs/benchmarks-log.md.
#
# usage: scripts/bench_prepare_threads.sh [--input FILE] [--hellaswag FILE] [--vocab DIR] [--mb 400] [--big-mb 3000]
#                                         [--threads-list "1 2"] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options input="$repo/../shared/data/tinyshakespeare.txt" hellaswag="$repo/../shared/data/hellaswag/hellaswag_val_full.txt" \
  vocab="$repo/../shared/data/gpt2" mb=400 big-mb=3000 \
  threads-list="1 2" -- "$@"
bench_need_built "$repo/build/mygpt-ddp" "$python"
"$python" -c 'import tiktoken' 2>/dev/null || bench_die "tiktoken is not installed in .venv: $python -m pip install tiktoken"
[[ -f "$input" ]] || bench_die "input file $input is missing"
bench_need_vocab "$vocab"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time (GNU time) is needed"
bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"

# The corpus, shaped like FineWeb's JSON lines: each record a document in "text" among metadata members
# (id, dump, url, date, language, score, token_count) that must be parsed past; the documents are the
# input text's blank-line-separated paragraphs interleaved with HellaSwag's contexts and endings (modern
# English, where the text may be old), repeated to size.
make_corpus() {  # make_corpus MB FILE
  "$python" - "$input" "$hellaswag" "$1" "$2" <<'PY'
import json, os, sys
text = open(sys.argv[1], encoding="utf-8").read()
docs = [p for p in text.split("\n\n") if p.strip()]
if os.path.exists(sys.argv[2]):
    lines = open(sys.argv[2], encoding="utf-8").read().split("\n")
    tasks = [" ".join(lines[i:i + 6][:1] + lines[i + 2:i + 6]) for i in range(0, len(lines) - 5, 6)]
    docs = [d for pair in zip(docs * (len(tasks) // len(docs) + 1), tasks) for d in pair]
target, out = int(sys.argv[3]) * 1_000_000, sys.argv[4]
written, n = 0, 0
with open(out, "w", encoding="utf-8") as f:
    while written < target:
        for d in docs:
            record = {"text": d, "id": f"<urn:uuid:{n:032x}>", "dump": "CC-MAIN-2024-10",
                      "url": f"https://example.org/{n % 9973}/page-{n}.html", "date": "2024-02-21T10:11:12Z",
                      "language": "en", "language_score": 0.93, "token_count": len(d) // 4, "score": 3.14}
            line = json.dumps(record) + "\n"
            f.write(line)
            written += len(line.encode())
            n += 1
            if written >= target:
                break
PY
}
make_corpus "$mb" "$work/corpus.jsonl"
bench_machine_facts "corpus $(du -m "$work/corpus.jsonl" | cut -f1) MB of JSON lines from $(basename "$input") and $(basename "$hellaswag")"
export OMP_NUM_THREADS=1

table="$work/table.md"
{
  echo "| threads | mygpt-ddp prepare MB/s | tiktoken encode_ordinary_batch MB/s | ratio | tokens (ours / tiktoken) | shards identical to 1 thread | our peak RSS |"
  echo "|---|---|---|---|---|---|---|"
} >"$table"
first=""
for n in $threads_list; do
  rm -rf "$work/out$n"
  /usr/bin/time -f "%e %M" -o "$work/time$n" "$binary" prepare "$work/corpus.jsonl" --vocab "$vocab" --out "$work/out$n" \
    --threads "$n" --val-tokens 0 --quiet >"$work/prepare$n.log" 2>&1 || { cat "$work/prepare$n.log" >&2; bench_die "prepare failed"; }
  read -r ours_s ours_kb <"$work/time$n"
  ours_tokens=$(sed -n 's/^wrote [0-9]* val and \([0-9]*\) train tokens.*/\1/p' "$work/prepare$n.log")
  "$python" "$repo/scripts/bench/tokenize_tiktoken_batch.py" --vocab "$vocab" --input "$work/corpus.jsonl" --threads "$n" \
    >"$work/tiktoken$n.log" 2>&1 || { cat "$work/tiktoken$n.log" >&2; bench_die "tiktoken failed"; }
  result=$(sed -n 's/^RESULT //p' "$work/tiktoken$n.log")
  read -r tik_s tik_tokens bytes < <("$python" -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["encode_s"], r["tokens"], r["bytes"])' "$result")
  identical="(reference)"
  if [[ -z $first ]]; then first=$n; else diff -rq "$work/out$first" "$work/out$n" >/dev/null && identical=yes || identical=NO; fi
  awk -v n="$n" -v b="$bytes" -v o="$ours_s" -v t="$tik_s" -v ot="$ours_tokens" -v tt="$tik_tokens" -v id="$identical" -v kb="$ours_kb" \
    'BEGIN { printf "| %d | %.1f | %.1f | %.2fx | %s / %s | %s | %.0f MiB |\n", n, b/1e6/o, b/1e6/t, t/o, ot, tt, id, kb/1024 }' >>"$table"
  [[ $ours_tokens == "$tik_tokens" ]] || bench_die "token counts differ at $n thread(s): ours $ours_tokens, tiktoken $tik_tokens"
done
# Flat memory: the same at 10x the corpus.
make_corpus "$big_mb" "$work/big.jsonl"
n=$(echo "$threads_list" | awk '{print $NF}')
/usr/bin/time -f "%e %M" -o "$work/time_big" "$binary" prepare "$work/big.jsonl" --vocab "$vocab" --out "$work/big" \
  --threads "$n" --val-tokens 0 --quiet >"$work/big.log" 2>&1 || { cat "$work/big.log" >&2; bench_die "prepare of the big corpus failed"; }
rm -rf "$work/big" "$work/big.jsonl"
read -r big_s big_kb <"$work/time_big"
# What the binary holds before reading anything (LibTorch's libraries): the floor under every RSS above.
/usr/bin/time -f "%M" -o "$work/time_help" "$binary" --help >/dev/null
read -r floor_kb <"$work/time_help"
bench_report "prepare --threads against tiktoken" "$table" \
  "Ours: the whole command (read, tokenize, write shards); tiktoken: encode_ordinary_batch alone, on documents already in memory." \
  "Peak RSS of prepare on a ${big_mb} MB corpus with $n thread(s): $(awk -v k="$big_kb" 'BEGIN { printf "%.0f MiB", k/1024 }') ($(awk -v s="$big_s" -v m="$big_mb" 'BEGIN { printf "%.1f MB/s", m/s }')); the binary's own floor (\`mygpt-ddp --help\`, LibTorch's libraries loaded): $(awk -v k="$floor_kb" 'BEGIN { printf "%.0f MiB", k/1024 }')."
