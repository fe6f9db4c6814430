#!/usr/bin/env bash
# `mygpt-ddp prepare --threads N` against tiktoken's encode_ordinary_batch(num_threads=N), side by side,
# on a JSON-lines corpus built from a text (its paragraphs as documents, the text repeated to --mb MB),
# for N = 1 and 2 (and --threads-list): MB/s of each (ours: the whole command, read + tokenize + write;
# tiktoken: the encode call alone, its documents already in memory), the token counts (which must agree),
# whether our shards are byte-identical across N, and our peak RSS on the corpus and on one --big-mb times
# larger (flat memory: the corpus streams through). Prints the CPU model and appends to docs/BENCHMARKS.md.
#
# usage: scripts/bench_prepare_threads.sh [--input FILE] [--vocab DIR] [--mb 40] [--big-mb 400]
#                                         [--threads-list "1 2"] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options input="$repo/../shared/data/tinyshakespeare.txt" vocab="$repo/../shared/data/gpt2" mb=40 big-mb=400 \
  threads-list="1 2" -- "$@"
bench_need_built "$repo/build/mygpt-ddp" "$python"
"$python" -c 'import tiktoken' 2>/dev/null || bench_die "tiktoken is not installed in .venv: $python -m pip install tiktoken"
[[ -f "$input" ]] || bench_die "input file $input is missing"
bench_need_vocab "$vocab"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time (GNU time) is needed"
bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"

# The corpus: the text's blank-line-separated paragraphs as JSON-lines documents, repeated to size.
make_corpus() {  # make_corpus MB FILE
  "$python" - "$input" "$1" "$2" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
docs = [p for p in text.split("\n\n") if p.strip()]
target, out = int(sys.argv[2]) * 1_000_000, sys.argv[3]
written = 0
with open(out, "w", encoding="utf-8") as f:
    while written < target:
        for d in docs:
            line = json.dumps({"text": d}) + "\n"
            f.write(line)
            written += len(line.encode())
            if written >= target:
                break
PY
}
make_corpus "$mb" "$work/corpus.jsonl"
bench_machine_facts "corpus $(du -m "$work/corpus.jsonl" | cut -f1) MB of JSON lines from $(basename "$input")"
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
bench_report "prepare --threads against tiktoken" "$table" \
  "Ours: the whole command (read, tokenize, write shards); tiktoken: encode_ordinary_batch alone, on documents already in memory." \
  "Peak RSS of prepare on a ${big_mb} MB corpus with $n thread(s): $(awk -v k="$big_kb" 'BEGIN { printf "%.0f MiB", k/1024 }') ($(awk -v s="$big_s" -v m="$big_mb" 'BEGIN { printf "%.1f MB/s", m/s }'))."
