#!/usr/bin/env bash
# A CORE pass here against nanochat's own Python (its nanochat/core_eval.py, imported from a nanochat
# checkout) on the same synthetic bundle (tests/core_reference.py bundle --nanochat-safe: every task type,
# both delimiters, Unicode; without the task smaller than its shots, on which nanochat's code fails) and
# the same model: our --preset PRESET trained one step on the bundle's text with a tokenizer.json made from
# it, exported to a Hugging Face folder that nanochat's side runs through transformers. Both on the CPU with
# --threads threads, nice'd; checks that both give the same per-task accuracies and prints a table
# (medians over --repeat runs, alternating which side goes first).
#   ours:   `mygpt-ddp eval --checkpoint HF_FOLDER --core BUNDLE` (process wall time: start, load, score)
#   theirs: scripts/bench/core_nanochat.py (the scoring loop's own time, model loaded; and the process's)
#
# usage: scripts/bench_core.sh --nanochat DIR [--preset gpt2] [--threads 1] [--repeat 3] [--max-per-task 0]
# (DIR holds nanochat/core_eval.py.) The table is printed only (--no-append is implied: this page's
# figures go to docs/evaluation.md by hand).
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options nanochat="" preset=gpt2 threads=1 repeat=3 max-per-task=0 -- "$@"
append=0
[[ -f $nanochat/nanochat/core_eval.py ]] || bench_usage_error "--nanochat DIR must hold nanochat/core_eval.py"
bench_need_built "$mygpt_bin" "$python"
bench_need_transformers "$python"
"$python" -c 'import jinja2, yaml, tokenizers' 2>/dev/null || bench_die "nanochat's side needs jinja2, pyyaml and tokenizers in $python"
nanochat="$(bench_abs_path "$nanochat")"
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads

bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"
bench_machine_facts
"$python" "$repo/tests/core_reference.py" bundle "$work/bundle" --nanochat-safe
"$python" "$repo/tests/tokenizer_reference.py" make-gpt4 "$work/bundle/text.txt" "$work/tok"
bench_run "$work/train.log" "one-step" "$binary" train "$work/bundle/text.txt" --vocab "$work/tok" --preset "$preset" \
  --device cpu --threads "$threads" --steps 1 --batch-size 1 --seq-len 64 --total-batch-tokens 0 --eval-every 0 \
  --warmup-steps 0 --out "$work/run"
bench_run "$work/export.log" "export" "$binary" export --checkpoint "$work/run" --out "$work/hf"

ours=() theirs=() theirs_process=()
for rep in $(seq 1 "$repeat"); do
  for side in $(bench_rotate "$rep" ours theirs); do
    start=$(date +%s.%N)
    if [[ $side == ours ]]; then
      bench_run "$work/ours.log" "our CORE" nice "$binary" eval --checkpoint "$work/hf" --core "$work/bundle" \
        --core-max-per-task "$max_per_task" --device cpu --threads "$threads" --quiet --json "$work/ours.json"
      ours+=("$(echo "$(date +%s.%N) - $start" | bc)")
    else
      bench_run "$work/theirs.log" "nanochat's CORE" nice "$python" "$repo/scripts/bench/core_nanochat.py" "$nanochat" \
        "$work/hf" "$work/bundle" "$max_per_task" "$work/theirs.json"
      theirs_process+=("$(echo "$(date +%s.%N) - $start" | bc)")
      theirs+=("$(awk '{print $2}' "$work/theirs.log" | tail -1)")
    fi
  done
done
"$python" - "$work/ours.json" "$work/theirs.json" <<'PY' || bench_die "the two sides' accuracies differ"
import json, sys
ours, theirs = (json.load(open(p)) for p in sys.argv[1:])
for label, t in theirs["tasks"].items():
    # nanochat averages in float32
    assert abs(ours["tasks"][label]["accuracy"] - t["accuracy"]) < 1e-6, (label, ours["tasks"][label], t)
print("per-task accuracies equal:", ", ".join(f"{k} {v['accuracy']:.3f}" for k, v in theirs["tasks"].items()))
PY
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
items=$(grep -oE "items [0-9]+" "$work/ours.log" | awk '{s += $2} END {print s}')
table="$work/table.md"
{
  echo "| CORE pass, $items items, --preset $preset, $threads thread(s) | median s | runs |"
  echo "|---|---|---|"
  echo "| mygpt-ddp eval --core (whole process) | $(median "${ours[@]}") | ${ours[*]} |"
  echo "| nanochat core_eval.py, scoring only | $(median "${theirs[@]}") | ${theirs[*]} |"
  echo "| nanochat core_eval.py, whole process | $(median "${theirs_process[@]}") | ${theirs_process[*]} |"
} >"$table"
echo "machine: $cpus CPUs, $cpu_model, load at start $load, torch $torch_version"
bench_report "CORE pass vs nanochat" "$table"
