#!/usr/bin/env bash
# `mygpt-ddp prepare` on Parquet against JSON lines holding the same FineWeb-shaped records (the document in
# "text" among metadata columns: id, dump, url, date, language, scores), built from a text's paragraphs and
# repeated to --mb MB of JSON lines; Parquet as FineWeb ships it (row groups of --row-group rows, each
# --compressions codec). Per input: CPU seconds (user + sys, all threads) and MB of the documents' text (the
# same bytes for every input) per CPU second, which a busy machine does not change much; wall seconds and
# text MB/s wall, which it does; peak RSS; and whether the shards are byte-identical to the JSON-lines ones.
# Best of --repeats (by CPU time).
#
# usage: scripts/bench_prepare_parquet.sh [--input FILE] [--vocab DIR] [--mb 100] [--threads 2]
#                                         [--row-group 1000] [--compressions "snappy zstd"] [--repeats 3] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options input="$repo/../shared/data/tinyshakespeare.txt" vocab="$repo/../shared/data/gpt2" mb=100 threads=2 \
  row-group=1000 compressions="snappy zstd" repeats=3 -- "$@"
bench_need_built "$mygpt_bin" "$python"
"$python" -c 'import pyarrow' 2>/dev/null || bench_die "pyarrow is not installed in .venv: $python -m pip install pyarrow"
[[ -f "$input" ]] || bench_die "input file $input is missing"
bench_need_vocab "$vocab"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time (GNU time) is needed"
bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"

text_bytes=$("$python" - "$input" "$mb" "$work" "$row_group" $compressions <<'PY'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
source, mb, work, row_group, compressions = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5:]
docs = [p for p in open(source, encoding="utf-8").read().split("\n\n") if p.strip()]
records, written, n = [], 0, 0
while written < mb * 1_000_000:
    d = docs[n % len(docs)]
    record = {"text": d, "id": f"<urn:uuid:{n:032x}>", "dump": "CC-MAIN-2024-10",
              "url": f"https://example.org/{n % 9973}/page-{n}.html", "date": "2024-02-21T10:11:12Z",
              "language": "en", "language_score": 0.93, "token_count": len(d) // 4, "score": 3.14}
    records.append(record)
    written += len(json.dumps(record)) + 1
    n += 1
with open(f"{work}/corpus.jsonl", "w", encoding="utf-8") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")
table = pa.Table.from_pylist(records)
for c in compressions:
    pq.write_table(table, f"{work}/corpus.{c}.parquet", compression=c, row_group_size=row_group)
print(sum(len(r["text"].encode()) for r in records))
PY
)
bench_machine_facts "corpus: $(du -m "$work/corpus.jsonl" | cut -f1) MB of JSON lines ($((text_bytes / 1000000)) MB of text) from $(basename "$input")"
export OMP_NUM_THREADS=1

table="$work/table.md"
{
  echo "| input | file MB | CPU s (user+sys, best of $repeats) | text MB per CPU s | wall s | text MB/s wall | peak RSS | shards identical to JSON lines |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$table"
for name in corpus.jsonl $(printf 'corpus.%s.parquet ' $compressions); do
  best=""
  for rep in $(seq "$repeats"); do
    rm -rf "$work/out_$name"
    /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$binary" prepare "$work/$name" --vocab "$vocab" --out "$work/out_$name" \
      --threads "$threads" --val-tokens 0 --quiet >"$work/prepare.log" 2>&1 || { cat "$work/prepare.log" >&2; bench_die "prepare of $name failed"; }
    read -r s kb user sys <"$work/time"
    cpu=$(awk -v u="$user" -v y="$sys" 'BEGIN { print u + y }')
    if [[ -z $best ]] || awk -v a="$cpu" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$cpu; best_wall=$s; best_kb=$kb; fi
  done
  identical="(reference)"
  [[ $name == corpus.jsonl ]] || { cmp -s "$work/out_corpus.jsonl/train_000000.bin" "$work/out_$name/train_000000.bin" && identical=yes || identical=NO; }
  awk -v n="$name" -v mb="$(du -m "$work/$name" | cut -f1)" -v c="$best" -v s="$best_wall" -v t="$text_bytes" \
    -v kb="$best_kb" -v id="$identical" \
    'BEGIN { printf "| %s | %s | %.2f | %.1f | %.2f | %.1f | %.0f MiB | %s |\n", n, mb, c, t/1e6/c, s, t/1e6/s, kb/1024, id }' >>"$table"
done
bench_report "prepare on Parquet against JSON lines" "$table" \
  "The whole command (read, decompress or parse, tokenize with GPT-2's BPE on --threads $threads, write shards); the same documents in each input. CPU time counts every thread's."
