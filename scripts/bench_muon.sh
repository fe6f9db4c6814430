#!/usr/bin/env bash
# AdamW vs --optimizer muon on Tiny Shakespeare, CPU, single process: validation loss against steps and
# training wall time, the steps Muon needs to reach AdamW's validation loss at the last step, and the
# time of a step. Two data sets: characters with the README's CPU configuration (4 layers, 128 wide,
# block 64, batch 12, dropout 0), and GPT-2 tokens (the text prepared with `prepare --vocab`) with the
# same small model. Each seed trains AdamW and Muon for --char-steps / --gpt2-steps steps, and Muon once
# more with a full schedule of --short-fraction of those steps (the goal: AdamW's loss in 0.7x the steps).
# The data order is given explicitly (sequential) so the runs compare whatever the default is. The
# variants of one seed run at the same time (one thread each), so their step times share the load.
# Prints markdown tables and appends them to docs/BENCHMARKS.md.
#
# usage: scripts/bench_muon.sh [--seeds "1337 1338"] [--configs "char gpt2"] [--char-steps 2000]
#          [--gpt2-steps 1000] [--eval-every 100] [--short-fraction 0.7] [--threads 1]
#          [--muon-flags "--muon-lr 0.02"] [--data FILE] [--vocab DIR] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options seeds="1337 1338" configs="char gpt2" char-steps=2000 gpt2-steps=1000 eval-every=100 \
  short-fraction=0.7 threads=1 muon-flags="" data="$repo/../shared/data/tinyshakespeare.txt" \
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
"$python" - "$runs" "$steps" >"$table" <<'PY'
import collections, json, statistics, sys

runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    config, seed, variant, path, wall = line.split()
    records = [json.loads(l) for l in open(path)]
    train = [r for r in records if "loss" in r and "val_loss" not in r]
    val = {r["step"]: r["val_loss"] for r in records if "val_loss" in r}
    # Training time up to (and including) step s: the sum of the step times, evaluations excluded.
    elapsed, t = {}, 0.0
    for r in train:
        t += r["dt_ms"] / 1000
        elapsed[r["step"] + 1] = t
    elapsed[0] = 0.0
    runs[(config, seed)][variant] = {"val": val, "elapsed": elapsed, "steps": len(train),
                                     "dt": statistics.median(r["dt_ms"] for r in train[10:]), "wall": float(wall)}

def reach(run, target):
    """The first evaluated step whose validation loss is at or below target, or None."""
    hits = [s for s in sorted(run["val"]) if run["val"][s] <= target + 1e-12]
    return hits[0] if hits else None

print("| data | seed | AdamW val @ N | Muon val @ N | Muon steps to AdamW's val @ N (ratio) | train time to it, Muon / AdamW "
      "| Muon, schedule of 0.7 N: val @ 0.7 N | step ms AdamW / Muon (ratio) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
curves = collections.defaultdict(list)
for (config, seed), v in runs.items():
    a, m = v["adamw"], v["muon"]
    n = a["steps"]
    target = a["val"][n]
    hit = reach(m, target)
    reached = f"{hit} ({hit / n:.2f})" if hit is not None else f"not reached (min {min(m['val'].values()):.4f})"
    times = f"{m['elapsed'][hit]:.0f} s / {a['elapsed'][n]:.0f} s" if hit is not None else "-"
    short = v.get("muon_short")
    short_text = f"{short['val'][short['steps']]:.4f} ({short['steps']} steps)" if short else "-"
    print(f"| {config} | {seed} | {target:.4f} | {m['val'][n]:.4f} | {reached} | {times} | {short_text} "
          f"| {a['dt']:.1f} / {m['dt']:.1f} ({m['dt'] / a['dt']:.2f}) |")
    for variant in ("adamw", "muon"):
        curves[(config, variant)].append(v[variant])

print()
print("Validation loss against steps (mean over seeds) and training seconds to that step (mean):")
print()
for config in sorted({c for c, _ in curves}):
    a, m = curves[(config, "adamw")], curves[(config, "muon")]
    steps = sorted(a[0]["val"])
    stride = max(1, len(steps) // 10)
    print(f"| {config}: step | AdamW val | AdamW s | Muon val | Muon s |")
    print("|---:|---:|---:|---:|---:|")
    for s in steps[::stride] + ([steps[-1]] if (len(steps) - 1) % stride else []):
        mean = lambda rs, key: statistics.mean(r[key][s] for r in rs)
        print(f"| {s} | {mean(a, 'val'):.4f} | {mean(a, 'elapsed'):.0f} | {mean(m, 'val'):.4f} | {mean(m, 'elapsed'):.0f} |")
    print()
PY
bench_report "AdamW vs Muon on Tiny Shakespeare (CPU, steps to the same validation loss)" "$table" \
  "single process, --threads $threads, flags: \`${common[*]}\`; char: \`--steps $char_steps\`, gpt2 (GPT-2 tokens from \`prepare --vocab\`): \`--steps $gpt2_steps\`; Muon: \`--optimizer muon $muon_flags\` (AdamW keeps --lr for embeddings, head, biases, gains); seeds: $seeds" \
  "N = the run's steps; AdamW's val @ N is the target; Muon's steps to reach it are read from its N-step run's validation curve (every $eval_every steps), under its own (N-step) schedule; the 0.7 N column is a separate Muon run whose whole schedule is 0.7 N steps" \
  "step ms: median over the steps after the 10th (evaluations excluded)"
