#!/usr/bin/env bash
# `mygpt-ddp tokenizer train` against rustbpe (nanochat's tok_train: train_from_iterator over documents
# streamed from the file), side by side on the same JSON-lines corpus (Tiny Shakespeare's paragraphs and
# HellaSwag's tasks, repeated to --mb MB; or with --corpus words, documents of words drawn from a pool of
# --pool random letter strings, which makes millions of distinct chunks: the memory test), the same split pattern (nanochat's), vocabulary, doc cap and
# threads (rustbpe's rayon pool is set by RAYON_NUM_THREADS): wall time and peak RSS (GNU time) of each
# whole process, whether the merges are identical, our binary's own floor (LibTorch's libraries, loaded
# by `mygpt-ddp --help`), and the CPU model. Both run under nice. Prints a table and appends it to
# docs/benchmarks-log.md (not with --no-append).
#
# usage: scripts/bench_tokenizer_train.sh [--mb 100] [--vocab-size 32768] [--doc-cap 10000] [--threads-list "2"]
#                                         [--corpus text|words] [--pool 3000000] [--input FILE] [--hellaswag FILE] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options input="$repo/../shared/data/tinyshakespeare.txt" hellaswag="$repo/../shared/data/hellaswag/hellaswag_val_full.txt" \
  mb=100 vocab-size=32768 doc-cap=10000 threads-list="2" corpus=text pool=3000000 -- "$@"
bench_need_built "$mygpt_bin" "$python"
"$python" -c 'import rustbpe' 2>/dev/null || bench_die "rustbpe is not installed in .venv: $python -m pip install rustbpe"
[[ -f "$input" ]] || bench_die "input file $input is missing"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time (GNU time) is needed"
bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"

"$python" - "$input" "$hellaswag" "$mb" "$work/corpus.jsonl" "$corpus" "$pool" <<'PY'
import json, os, random, string, sys
if sys.argv[5] == "words":
    rng = random.Random(7)
    pool = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 12))) for _ in range(int(sys.argv[6]))]
    target, written = int(sys.argv[3]) * 1_000_000, 0
    with open(sys.argv[4], "w", encoding="utf-8") as f:
        while written < target:
            line = json.dumps({"text": " ".join(rng.choices(pool, k=1000))}) + "\n"
            f.write(line)
            written += len(line)
    sys.exit(0)
text = open(sys.argv[1], encoding="utf-8").read()
docs = [p for p in text.split("\n\n") if p.strip()]
if os.path.exists(sys.argv[2]):
    lines = open(sys.argv[2], encoding="utf-8").read().split("\n")
    tasks = [" ".join(lines[i:i + 6][:1] + lines[i + 2:i + 6]) for i in range(0, len(lines) - 5, 6)]
    docs = [d for pair in zip(docs * (len(tasks) // len(docs) + 1), tasks) for d in pair]
target, written = int(sys.argv[3]) * 1_000_000, 0
with open(sys.argv[4], "w", encoding="utf-8") as f:
    while written < target:
        for d in docs:
            line = json.dumps({"text": d}) + "\n"
            f.write(line)
            written += len(line.encode())
            if written >= target:
                break
PY
bench_machine_facts "corpus ($corpus) $(du -m "$work/corpus.jsonl" | cut -f1) MB of JSON lines; vocab $vocab_size; doc cap $doc_cap"
echo "CPU: $cpu_model"
export OMP_NUM_THREADS=1
pattern="'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}{1,2}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"

table="$work/table.md"
{
  echo "| threads | ours s | rustbpe s | speed ratio | ours peak RSS | rustbpe peak RSS | merges identical |"
  echo "|---|---|---|---|---|---|---|"
} >"$table"
for n in $threads_list; do
  rm -rf "$work/tok$n"
  /usr/bin/time -f "%e %M" -o "$work/ours_time$n" nice "$binary" tokenizer train "$work/corpus.jsonl" \
    --vocab-size "$vocab_size" --pattern nanochat --special "<|endoftext|>" --doc-cap "$doc_cap" --threads "$n" \
    --out "$work/tok$n" --quiet >"$work/ours$n.log" 2>&1 || { cat "$work/ours$n.log" >&2; bench_die "tokenizer train failed"; }
  read -r ours_s ours_kb <"$work/ours_time$n"
  RAYON_NUM_THREADS=$n /usr/bin/time -f "%e %M" -o "$work/rust_time$n" nice "$python" "$repo/scripts/bench/train_rustbpe.py" \
    --input "$work/corpus.jsonl" --vocab-size $((vocab_size - 1)) --pattern "$pattern" --doc-cap "$doc_cap" \
    --ranks-out "$work/ranks$n.txt" >"$work/rust$n.log" 2>&1 || { cat "$work/rust$n.log" >&2; bench_die "rustbpe failed"; }
  read -r rust_s rust_kb <"$work/rust_time$n"
  # Different merges are a result for the table ("NO (...)", exit 1); anything else ends the run.
  same=$("$python" "$repo/scripts/bench/compare_trained_ranks.py" "$work/tok$n/tokenizer.json" "$work/ranks$n.txt") ||
    [[ $same == NO* ]] || bench_die "comparing the merges with rustbpe's failed"
  awk -v n="$n" -v o="$ours_s" -v r="$rust_s" -v ok="$ours_kb" -v rk="$rust_kb" -v s="$same" \
    'BEGIN { printf "| %d | %.1f | %.1f | %.2fx | %.0f MiB | %.0f MiB | %s |\n", n, o, r, r/o, ok/1024, rk/1024, s }' >>"$table"
  grep -h "^trained" "$work/ours$n.log"
done
/usr/bin/time -f "%M" -o "$work/time_help" "$binary" --help >/dev/null
read -r floor_kb <"$work/time_help"
bench_report "tokenizer train against rustbpe ($corpus corpus, $mb MB)" "$table" \
  "Both: the whole process (read the JSON lines, split, count, merge; ours also writes tokenizer.json), nanochat's pattern, vocabulary $vocab_size with one special token, doc cap $doc_cap." \
  "Our binary's floor (\`mygpt-ddp --help\`, LibTorch's libraries loaded): $(awk -v k="$floor_kb" 'BEGIN { printf "%.0f MiB", k/1024 }')."
