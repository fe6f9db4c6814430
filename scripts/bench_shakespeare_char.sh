#!/usr/bin/env bash
# The README's Tiny Shakespeare CPU command with its defaults, side by side with nanoGPT's train.py on
# config/train_shakespeare_char.py and the README's CPU overrides (nanoGPT's own README: val loss about
# 1.88), on the same torch (.venv), at the same time, one thread each, the same model (no biases, as
# nanoGPT's config has it). Prints the validation loss of
# both at every evaluation and appends the table to docs/benchmarks-log.md.
# Then the speed, one run at a time (each alone on the machine): ours (also with --keep-freed-memory
# false: glibc's malloc defaults), nanoGPT eager and nanoGPT with
# --compile=True (torch.compile, inductor's C++ code), --speed-steps iterations each, --speed-repeat
# times in rotating order; the median ms/iter over iterations 50-400 of every run of a side.
#
# usage: scripts/bench_shakespeare_char.sh --nanogpt DIR [--data FILE] [--steps 2000] [--threads 1]
#          [--speed-steps 450] [--speed-repeat 2] [--no-append]
#
# DIR is a checkout of https://github.com/karpathy/nanoGPT (it is copied, not written to); its
# data/shakespeare_char/prepare.py gets FILE as input.txt, so nothing is downloaded. nanoGPT's
# validation loss is the mean of 20 random batches (--eval_iters=20), ours of the first 20 batches of
# the held-out tenth (--eval-steps 20): the same split (the text's last 10%), other samples of it.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options nanogpt="" data="$repo/../shared/data/tinyshakespeare.txt" steps=2000 threads=1 speed-steps=450 \
  speed-repeat=2 -- "$@"
(( speed_steps > 400 )) || bench_usage_error "--speed-steps must be above 400 (the median is over iterations 50-400)"

[[ -n $nanogpt ]] || bench_usage_error "--nanogpt DIR is required (a checkout of karpathy/nanoGPT)"
[[ -f $nanogpt/train.py && -f $nanogpt/data/shakespeare_char/prepare.py ]] ||
  bench_die "$nanogpt is not a nanoGPT checkout (no train.py, data/shakespeare_char/prepare.py)"
bench_need_built "$repo/build/mygpt-ddp" "$python"
[[ -f "$data" ]] || bench_die "data file $data is missing (expected the shared tinyshakespeare.txt)"
data="$(bench_abs_path "$data")"
nanogpt_commit="$(git -C "$nanogpt" rev-parse --short HEAD 2>/dev/null || echo unknown)"

bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"
cp -r "$nanogpt" "$work/nanogpt"
cp "$data" "$work/nanogpt/data/shakespeare_char/input.txt"
# prepare.py imports requests only to download input.txt, which is already there.
mkdir -p "$work/stub"
"$python" -c 'import requests' 2>/dev/null || echo 'def get(*a, **k): raise RuntimeError("no download here")' >"$work/stub/requests.py"
(cd "$work/nanogpt/data/shakespeare_char" && PYTHONPATH="$work/stub" "$python" prepare.py >"$work/prepare.log") ||
  { cat "$work/prepare.log" >&2; bench_die "nanoGPT's prepare.py failed"; }

bench_machine_facts "nanoGPT $nanogpt_commit"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
# --bias false: nanoGPT's config leaves train.py's `bias = False`, so both sides train the same model.
ours_model=(train "$data" --preset shakespeare-char --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12
            --bias false --dropout 0 --eval-steps 20 --device cpu --threads "$threads")
ours=("${ours_model[@]}" --steps "$steps" --out "$work/ours")
theirs=(train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 --log_interval=1
        --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters="$steps"
        --lr_decay_iters="$steps" --dropout=0.0 --out_dir="$work/nanogpt-out")
echo "== side by side: mygpt-ddp ${ours[*]}"
echo "==               nanoGPT python ${theirs[*]}"
start=$(date +%s)
"$binary" "${ours[@]}" >"$work/ours.log" 2>&1 &
ours_pid=$!
(cd "$work/nanogpt" && exec "$python" "${theirs[@]}") >"$work/nanogpt.log" 2>&1 &
theirs_pid=$!
wait "$ours_pid" || { cat "$work/ours.log" >&2; bench_die "the mygpt-ddp run failed"; }
ours_s=$(($(date +%s) - start))
wait "$theirs_pid" || { tail -n 30 "$work/nanogpt.log" >&2; bench_die "the nanoGPT run failed"; }
theirs_s=$(($(date +%s) - start))
grep 'data order' "$work/ours.log" || true

table="$work/table.md"
"$python" - "$work/ours/metrics.jsonl" "$work/nanogpt.log" "$ours_s" "$theirs_s" >"$table" <<'PY'
import json, re, sys
metrics, log, ours_s, theirs_s = sys.argv[1:]
ours = {r["step"]: r["val_loss"] for r in map(json.loads, open(metrics)) if "val_loss" in r}
theirs = {int(m[1]): float(m[2]) for m in re.finditer(r"step (\d+): train loss [\d.]+, val loss ([\d.]+)", open(log).read())}
steps = sorted(set(ours) | set(theirs))
print("| step | mygpt-ddp val loss | nanoGPT val loss |")
print("|---:|---:|---:|")
fmt = lambda d, s: f"{d[s]:.4f}" if s in d else "-"
for s in steps:
    print(f"| {s} | {fmt(ours, s)} | {fmt(theirs, s)} |")
print(f"| wall time | {int(ours_s) // 60} min {int(ours_s) % 60} s | {int(theirs_s) // 60} min {int(theirs_s) % 60} s |")
PY

# Speed: each side alone; both evaluate every 250 iterations as in the run above (the median passes over
# those iterations and nanoGPT's checkpoint writes).
speed_theirs=("${theirs[@]}")
for i in "${!speed_theirs[@]}"; do
  case "${speed_theirs[$i]}" in
    --max_iters=*) speed_theirs[$i]="--max_iters=$speed_steps" ;;
    --lr_decay_iters=*) speed_theirs[$i]="--lr_decay_iters=$speed_steps" ;;
  esac
done
for ((rep = 1; rep <= speed_repeat; rep++)); do
  for side in $(bench_rotate "$rep" ours ours-glibc eager compiled); do
    log="$work/speed-$side-$rep.log"
    echo "== speed run $rep/$speed_repeat: $side"
    case $side in
      ours) bench_run "$log" mygpt-ddp "$binary" "${ours_model[@]}" --steps "$speed_steps" --log-every 1 --eval-every 250 \
              --out "$work/speed-ours-$rep" ;;
      ours-glibc) bench_run "$log" mygpt-ddp "$binary" "${ours_model[@]}" --steps "$speed_steps" --log-every 1 --eval-every 250 \
              --keep-freed-memory false --out "$work/speed-ours-glibc-$rep" ;;
      eager) (cd "$work/nanogpt" && bench_run "$log" "nanoGPT eager" "$python" "${speed_theirs[@]}" \
                --out_dir="$work/speed-eager-$rep") ;;
      compiled) (cd "$work/nanogpt" && bench_run "$log" "nanoGPT compiled" "$python" "${speed_theirs[@]/--compile=False/--compile=True}" \
                --out_dir="$work/speed-compiled-$rep") ;;
    esac
  done
done
speed_table="$work/speed.md"
"$python" - "$work" "$speed_repeat" "$(( 12 * 64 ))" >"$speed_table" <<'PY'
import json, re, statistics, sys
work, repeat, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def ours(rep, name="ours"):
    rows = [json.loads(l) for l in open(f"{work}/speed-{name}-{rep}/metrics.jsonl")]
    return {r["step"]: r["dt_ms"] for r in rows if "dt_ms" in r}
def nanogpt(side, rep):
    text = open(f"{work}/speed-{side}-{rep}.log").read()
    return {int(m[1]): float(m[2]) for m in re.finditer(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", text)}
sides = {"mygpt-ddp train": ours, "mygpt-ddp train --keep-freed-memory false": lambda r: ours(r, "ours-glibc"),
         "nanoGPT train.py, eager": lambda r: nanogpt("eager", r),
         "nanoGPT train.py, --compile=True": lambda r: nanogpt("compiled", r)}
medians = {}
for name, read in sides.items():
    per_run = []
    for rep in range(1, repeat + 1):
        times = [t for step, t in read(rep).items() if 50 <= step <= 400]
        if len(times) < 300:
            sys.exit(f"{name}, run {rep}: only {len(times)} iterations in 50-400 were logged")
        per_run.append(statistics.median(times))
    medians[name] = (statistics.median(per_run), per_run)
base = medians["mygpt-ddp train"][0]
print("| side | ms/iter, median of iterations 50-400 (each run) | tok/s | mygpt-ddp's speed relative to it |")
print("|---|---:|---:|---:|")
for name, (median, per_run) in medians.items():
    runs = " / ".join(f"{t:.1f}" for t in per_run)
    print(f"| {name} | {median:.1f} ({runs}) | {tokens / median * 1000:.0f} | {median / base:.2f}x |")
PY
bench_report "Tiny Shakespeare CPU run: the README's command vs nanoGPT" "$table" \
  "torch $torch_version (.venv, both sides), $threads thread(s) each, both runs at the same time; nanoGPT $nanogpt_commit" \
  "mygpt-ddp: \`mygpt-ddp ${ours[*]/#$work\//}\` (data order: the default, auto)" \
  "nanoGPT: \`python ${theirs[*]/#--out_dir=$work\//--out_dir=}\` after data/shakespeare_char/prepare.py"
bench_report "Tiny Shakespeare CPU speed: mygpt-ddp vs nanoGPT eager and torch.compile" "$speed_table" \
  "torch $torch_version (.venv, all sides), $threads thread(s), one run at a time, $speed_repeat runs per side in rotating order, $speed_steps iterations each; nanoGPT $nanogpt_commit" \
  "the same flags as the run above with --steps/--max_iters $speed_steps; ours with --log-every 1 --eval-every 250 (nanoGPT evaluates every 250 too); compiled: --compile=True"
