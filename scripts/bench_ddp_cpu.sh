#!/usr/bin/env bash
# Data-parallel CPU training throughput on N ranks: `mpirun -np N mygpt-ddp train` (overlapped bucketed
# gradient sync, and again with --ddp-overlap false) next to the same model and loop under PyTorch's own
# DistributedDataParallel (torchrun, gloo; scripts/bench/pytorch_ddp_train.py), same torch build (.venv),
# data, config, seed and threads, in one invocation. Prints a markdown table and appends it to
# docs/benchmarks-log.md.
#
# usage: scripts/bench_ddp_cpu.sh [--np 2] [--steps 40] [--skip 5] [--repeat 2] [--threads 1]
#          [--model "--preset small --n-layer 6 --n-embd 256"] [--batch 8] [--seq-len 128] [--grad-accum 1]
#          [--bucket-mb 25] [--data FILE] [--no-append]
#
# Throughput is tokens of all ranks per second of one optimizer step as rank 0 times it, median over
# the steps after the first --skip of every run, pooled over --repeat runs per variant that rotate
# which variant goes first (a shared machine drifts). From our metrics.jsonl: the mean time finish()
# waited for communication (sync_wait_ms: the exposed part) and how many buckets started during backward.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options np=2 steps=40 skip=5 repeat=2 threads=1 model="--preset small --n-layer 6 --n-embd 256" batch=8 \
  seq-len=128 grad-accum=1 bucket-mb=25 data="$repo/../shared/data/tinyshakespeare.txt" -- "$@"
(( steps > skip )) || bench_usage_error "--steps must exceed --skip"

twin="$repo/scripts/bench/pytorch_ddp_train.py"
bench_need_built "$repo/build/mygpt-ddp" "$python" "$torchrun"
[[ -f "$data" ]] || bench_die "data file $data is missing (expected the shared tinyshakespeare.txt)"
data="$(bench_abs_path "$data")"

# shellcheck source=mpi_env.sh
source "$repo/scripts/mpi_env.sh"
bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"

# The same flags go to both sides (pytorch_ddp_train.py takes mygpt-ddp train's flags).
flags="$model --batch-size $batch --seq-len $seq_len --grad-accum $grad_accum --steps $steps --seed 1337"
# Launch alike: torchrun starts every worker in a session of its own (start_new_session), which on a
# Linux kernel with autogroup scheduling gives each its own share of a busy machine's CPU; `setsid -w`
# gives our ranks the same. Neither side pins ranks to cores (torchrun does not; mpirun would).
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"

bench_machine_facts
echo "config: $flags | $np ranks x $threads thread(s) | buckets $bucket_mb MiB"

variants=(cpp cpp-no-overlap py)
for ((rep = 1; rep <= repeat; rep++)); do
  for variant in $(bench_rotate "$rep" "${variants[@]}"); do
    run="$work/$variant-r$rep"
    echo "== run $rep/$repeat: $variant"
    case "$variant" in
      cpp|cpp-no-overlap)
        overlap=true; [[ $variant == cpp-no-overlap ]] && overlap=false
        # shellcheck disable=SC2086  # flags are words on purpose
        bench_run "$run.log" C++ "${MYGPT_MPIRUN[@]}" -np "$np" setsid -w "$binary" train "$data" --device cpu \
            --threads "$threads" --eval-every 0 --log-every 10 --bucket-mb "$bucket_mb" --ddp-overlap "$overlap" \
            $flags --out "$run"
        cp "$run/metrics.jsonl" "$run.jsonl" ;;
      py)
        # shellcheck disable=SC2086
        bench_run "$run.log" Python "$torchrun" --standalone --nproc_per_node "$np" "$twin" --data "$data" \
            --threads "$threads" --log-every 10 --skip-steps "$skip" --bucket-mb "$bucket_mb" $flags --metrics "$run.jsonl"
        ;;
    esac
    grep '^step' "$run.log" | tail -n 2
  done
done

table="$work/table.md"
# shellcheck disable=SC2086
BENCH_DATA="$data" "$python" - "$work" "$repeat" "$skip" "$bucket_mb" $flags <<'PY' >"$table"
import json, os, statistics, sys
work, repeat, skip, bucket_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
flags = sys.argv[5:]
sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "bench"))
import pytorch_gpt_train as twin
from pytorch_allreduce import plan_buckets

# Our bucket count for this model: the same plan as trainer/gradient_sync.cpp, on the twin's
# parameters (registered in the same order as model/gpt.cpp's). The vocabulary: the data's characters.
params = list(twin.CharRun(twin.parse_args(["--data", os.environ["BENCH_DATA"]] + flags)).model.parameters())
buckets = len(plan_buckets(params, int(bucket_mb * (1 << 20))))
grad_mib = sum(p.numel() for p in params) * 4 / 2**20

def steps(path):
    return [r for r in map(json.loads, open(path)) if "loss" in r]
runs = {v: [steps(f"{work}/{v}-r{r}.jsonl") for r in range(1, repeat + 1)] for v in ("cpp", "cpp-no-overlap", "py")}
timed = {v: [s for run in runs[v] for s in run[skip:]] for v in runs}
rate = {v: statistics.median(s["tok_per_sec"] for s in timed[v]) for v in runs}
reference = runs["cpp"][0]
names = {"cpp": "C++ mygpt-ddp (MPI), overlap on", "cpp-no-overlap": "C++ mygpt-ddp (MPI), --ddp-overlap false",
         "py": "PyTorch DDP (gloo)"}
print(f"model: {sum(p.numel() for p in params):,} parameters = {grad_mib:.1f} MiB of gradients "
      f"in {buckets} bucket(s) of {bucket_mb:g} MiB")
print()
print("| variant | steps x runs (timed) | median tok/s, all ranks | vs PyTorch DDP | median step ms "
      "| mean sync_wait_ms (exposed comm) | buckets started in backward | loss@0 | max abs loss diff vs first C++ run |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for v in ("cpp", "cpp-no-overlap", "py"):
    wait = overlapped = "-"
    if v != "py":
        wait = f"{statistics.mean(s['sync_wait_ms'] for s in timed[v]):.1f}"
        overlapped = f"{statistics.mean(s['buckets_overlapped'] for s in timed[v]):.2f} of {buckets}"
    dloss = max(abs(x["loss"] - y["loss"]) for run in runs[v] for x, y in zip(reference, run))
    print(f"| {names[v]} | {len(runs[v][0])} x {repeat} ({len(timed[v])}) | {rate[v]:.0f} | {rate[v] / rate['py']:.2f} "
          f"| {statistics.median(s['dt_ms'] for s in timed[v]):.0f} | {wait} | {overlapped} "
          f"| {runs[v][0][0]['loss']:.4f} | {dloss:.2e} |")
PY
bench_report "Data-parallel CPU training, $np ranks, C++ (MPI) vs PyTorch DDP (gloo)" "$table" \
  "torch $torch_version (.venv, both sides); $mpi_version; $threads intra-op thread(s) per rank, OMP_NUM_THREADS=$threads" \
  "C++: \`mpirun --oversubscribe --bind-to none -np $np setsid -w build/mygpt-ddp train tinyshakespeare.txt --device cpu --threads $threads --eval-every 0 --bucket-mb $bucket_mb --ddp-overlap true|false $flags\`" \
  "PyTorch: \`torchrun --standalone --nproc_per_node $np scripts/bench/pytorch_ddp_train.py --data tinyshakespeare.txt --threads $threads --bucket-mb $bucket_mb $flags\` (DDP bucket_cap_mb=$bucket_mb, AdamW fused, clip 1.0, warmup + cosine LR, sequential sharded batches)" \
  "$repeat runs per variant rotating which goes first; median over the steps after the first $skip of each run; tok/s counts every rank's tokens"
