#!/usr/bin/env bash
# train --packing rows (today's default, --data-order auto) against --packing best-fit (nanochat's BOS-aligned
# best-fit rows): the same model, seed, batch and steps, on shards that `prepare` makes from a text's
# blank-line-separated paragraphs as documents (GPT-2's tokenizer; its last --val-tokens tokens validate).
# Per packing: the validation loss at the end (the same validation rows for both: validation keeps rows),
# the last training loss, the share of tokens best-fit cropped, and seconds.
#
# usage: scripts/bench_packing.sh [--input FILE] [--vocab DIR] [--preset small] [--steps 250] [--batch-size 8]
#                                 [--seq-len 128] [--val-tokens 30000] [--threads 2] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options input="$repo/../shared/data/tinyshakespeare.txt" vocab="$repo/../shared/data/gpt2" preset=small steps=250 \
  batch-size=8 seq-len=128 val-tokens=30000 threads=2 -- "$@"
bench_need_built "$repo/build/mygpt-ddp" "$python"
[[ -f "$input" ]] || bench_die "input file $input is missing"
bench_need_vocab "$vocab"
bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"

"$python" - "$input" "$work/docs.jsonl" <<'PY'
import json, sys
docs = [p for p in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if p.strip()]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")
PY
bench_run "$work/prepare.log" prepare "$binary" prepare "$work/docs.jsonl" --vocab "$vocab" --out "$work/shards" \
  --val-tokens "$val_tokens" --quiet
bench_machine_facts "$(wc -l <"$work/docs.jsonl") documents of $(basename "$input"); $(sed -n 's/^wrote //p' "$work/prepare.log")"
export OMP_NUM_THREADS=$threads

table="$work/table.md"
{
  echo "| packing | val loss (step $steps) | last train loss | cropped | seconds |"
  echo "|---|---|---|---|---|"
} >"$table"
for packing in rows best-fit; do
  start=$SECONDS
  bench_run "$work/$packing.log" "$packing training" "$binary" train "$work/shards" --preset "$preset" --steps "$steps" \
    --batch-size "$batch_size" --seq-len "$seq_len" --packing "$packing" --seed 1337 --eval-every "$steps" --eval-steps 20 \
    --log-every 50 --threads "$threads" --device cpu --out "$work/run_$packing"
  seconds=$((SECONDS - start))
  val=$(sed -n "s/^step $steps | val loss: \([0-9.]*\).*/\1/p" "$work/$packing.log" | tail -n 1)
  last=$(grep -o '"loss":[^,}]*' "$work/run_$packing/metrics.jsonl" | tail -n 1 | cut -d: -f2)
  cropped=$(sed -n 's/^packing best-fit: .*(\([0-9.]*%\) .*/\1/p' "$work/$packing.log")
  printf '| %s | %s | %s | %s | %s |\n' "$packing" "$val" "$last" "${cropped:-0 (none cropped)}" "$seconds" >>"$table"
done
bench_report "packing: rows against best-fit" "$table" \
  "--preset $preset, --batch-size $batch_size, --seq-len $seq_len, $steps steps, seed 1337, --device cpu --threads $threads; rows: --data-order auto (shuffled rows when the run reads its data more than once)."
