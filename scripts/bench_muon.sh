#!/usr/bin/env bash
# AdamW vs --optimizer muon on Tiny Shakespeare, CPU, single process: validation loss against steps and
# training wall time, the steps Muon needs to reach AdamW's validation loss at the last step, and the
# time of a step. Two data sets: characters with the README's CPU configuration (4 layers, 128 wide,
# block 64, batch 12, dropout 0), and GPT-2 tokens (the text prepared with `prepare --vocab`) with the
# same small model. Each seed trains AdamW and Muon for --char-steps / --gpt2-steps steps, and Muon once
# more with a full schedule of --short-fraction of those steps (the goal: AdamW's loss in 0.7x the steps).
# The data order is given explicitly (sequential) so the runs compare whatever the default is. The
# variants of one seed run at the same time (one thread each), so their step times share the load.
# Prints markdown tables and appends them to docs/benchmarks-log.md.
#
# usage: scripts/bench_muon.sh [--seeds "1337 1338"] [--configs "char gpt2"] [--char-steps 2000]
#          [--gpt2-steps 1000] [--eval-every 100] [--short-fraction 0.7] [--threads 1]
#          [--muon-flags "--muon-lr 0.02"] [--data FILE] [--vocab DIR] [--tabulate DIR] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options seeds="1337 1338" configs="char gpt2" char-steps=2000 gpt2-steps=1000 eval-every=100 \
  short-fraction=0.7 threads=1 muon-flags="" tabulate="" data="$repo/../shared/data/tinyshakespeare.txt" \
  vocab="$repo/../shared/data/gpt2" -- "$@"

bench_need_built "$repo/build/mygpt-ddp" "$python"
data="$(bench_abs_path "$data")"
bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"
bench_machine_facts
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"

model=(--n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --dropout 0)
common=(--preset shakespeare-char "${model[@]}" --eval-steps 20 --eval-every "$eval_every" --log-every 500
        --device cpu --threads "$threads" --data-order sequential)

# config_args CONFIG: the data flags of a config.
config_args() {
  case "$1" in
    char) echo "$data" ;;
    gpt2)
      if [[ ! -d $work/gpt2_shards ]]; then
        bench_need_vocab "$vocab"
        bench_run "$work/prepare.log" prepare "$binary" prepare --vocab "$vocab" --input "$data" \
            --out "$work/gpt2_shards"
      fi
      echo "$work/gpt2_shards --vocab $vocab" ;;
    *) bench_usage_error "unknown config '$1' (char, gpt2)" ;;
  esac
}

runs="$work/runs.txt"
: >"$runs"
# --tabulate DIR: no training, only the tables of the runs in a copy of an earlier invocation's work
# folder (its runs.txt and run folders), e.g. of one stopped early on a busy machine.
[[ -n $tabulate ]] && { runs="$tabulate/runs.txt"; configs=""; }
for config in $configs; do
  read -r -a args <<<"$(config_args "$config")"
  steps=$char_steps
  [[ $config == gpt2 ]] && steps=$gpt2_steps
  short=$("$python" -c "print(round($steps * $short_fraction))")
  for seed in $seeds; do
    # The variants of a seed run side by side, so that on a shared machine their step times see the
    # same load (one thread each).
    pids=()
    for variant in adamw muon muon_short; do
      run="$config-$seed-$variant"
      extra=(--steps "$steps" --optimizer adamw)
      # shellcheck disable=SC2206  # --muon-flags are words on purpose
      [[ $variant != adamw ]] && extra=(--steps "$steps" --optimizer muon $muon_flags)
      [[ $variant == muon_short ]] && extra=(--steps "$short" --optimizer muon $muon_flags)
      [[ $variant == muon_short && $short_fraction == 0 ]] && continue
      echo "== $config, seed $seed: $variant (${extra[*]})"
      (
        start=$SECONDS
        bench_run "$work/$run.log" "$run" "$binary" train "${args[@]}" "${common[@]}" --seed "$seed" "${extra[@]}" \
            --out "$work/$run"
        echo "$config $seed $variant $work/$run/metrics.jsonl $((SECONDS - start))" >>"$runs"
        grep 'val loss' "$work/$run.log" | tail -n 1 | sed "s/^/$run: /"
      ) &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || bench_die "a $config run of seed $seed failed"; done
  done
done

table="$work/table.md"
"$python" "$repo/scripts/bench/muon_table.py" "$runs" >"$table"
bench_report "AdamW vs Muon on Tiny Shakespeare (CPU, steps to the same validation loss)" "$table" \
  "single process, --threads $threads, flags: \`${common[*]}\`; char: \`--steps $char_steps\`, gpt2 (GPT-2 tokens from \`prepare --vocab\`): \`--steps $gpt2_steps\`; Muon: \`--optimizer muon $muon_flags\` (AdamW keeps --lr for embeddings, head, biases, gains); seeds: $seeds" \
  "N = the run's steps; AdamW's val @ N is the target; Muon's steps to reach it are read from its N-step run's validation curve (every $eval_every steps), under its own (N-step) schedule; the 0.7 N column is a separate Muon run whose whole schedule is 0.7 N steps" \
  "step ms: median over the steps after the 10th that ran while all variants of the seed were running (evaluations excluded); train time: the sum of step times"
