#!/usr/bin/env bash
# GPT-2 124M (`--preset gpt2`: vocab 50304, T=1024, bf16 autocast, fused AdamW) on one GPU, side by side in
# one invocation on the same torch, the same shards and the same batch:
#   C++       mygpt-ddp train SHARDS --preset gpt2 --device cuda --batch-size B [FLAGS], once per --variants
#             entry "LABEL:FLAGS" (default: the rows below)
#   PyTorch   scripts/bench/pytorch_gpt2_gpu.py --batch-size B, once per --twins entry: eager, compile
#             (torch.compile's default mode), compile-reduce-overhead (mode="reduce-overhead": CUDA graphs),
#             compile-max-autotune (mode="max-autotune": Triton autotuning; minutes of compiling)
# for each micro-batch of --batches. Prints a markdown table and appends it to docs/benchmarks-log.md with
# the GPU, driver and versions.
#
# The default C++ rows, each named by what it changes against the first (the defaults of the binary):
#   defaults                      (no flag) the CUDA loss kernel, the CUDA LayerNorm kernels, PyTorch's attention order
#   ATen loss                     --cuda-loss-kernel false      (the fused loss as ATen ops)
#   ATen LayerNorm                --cuda-norm-kernel false      (ATen's fp32 LayerNorm and its casts)
#   ATen loss + ATen LayerNorm    --cuda-loss-kernel false --cuda-norm-kernel false  (neither kernel)
#   flash attention               --attention flash
#   cuDNN attention               --attention cudnn             (one of the two is the defaults' choice on a
#                                                               given GPU: cuDNN's on Hopper with cuDNN >= 9.9)
#   plain loss                    --fused-loss false            (the whole logits, ATen's cross-entropy)
#   CUDA graph                    --cuda-graph true             (the step captured and replayed)
#   one-rank NCCL, grad-accum 2   RANK=0 WORLD_SIZE=1 ... --grad-accum 2: the multi-rank path with one rank
#                                 (c10d store, NCCL, 13 gradient buckets, the gradient copy), 2 micro-batches
#   one-rank NCCL, ZeRO 3, grad-accum 2   the same with --zero 3 (parameters gathered, gradients scattered)
# Words NAME=VALUE before a row's flags are its environment. A row whose flags the binary refuses as bad
# usage (exit 2 before training: a binary without --zero 3, say) says "refused by this binary: <its line>"
# and the rest goes on; a micro-batch that does not fit says "out of memory".
#
# Every row gives the same statistics over the same window of steps (--skip to --steps - 1), computed by
# scripts/bench/step_stats.py from each side's per-step log (the C++ metrics.jsonl, the twin's --metrics):
# ms/step median, mean, standard deviation and range, tok/s median, MFU (the C++ trainer's own figure; 6N +
# attention FLOPs per token against the bf16 dense peak of known GPUs; n/a for the twins), peak memory. Each
# side times one whole optimizer step ending in loss.item().
#
# usage: scripts/bench_gpt2_gpu.sh [--batches "16 32 64"] [--steps 60] [--skip 10] [--seq-len 1024]
#          [--model-flags ""] [--device cuda] [--precision bf16] [--variants "LABEL:FLAGS;..."] [--no-append]
#          [--keep DIR] [--twins "eager compile compile-reduce-overhead compile-max-autotune"] [--profile-dir DIR]
# --keep DIR: each row's log and per-step metrics (C++ and twin) are copied into DIR, and its table line
# appended to DIR/table.md, the moment the row ends (scripts/gpu_check.sh packs DIR: a run cut short by
# its budget still brings back every row that finished). Table lines are printed as they come either way.
# --profile-dir DIR: every row also writes a profiler trace of 3 steps taken after the first 10 into
# DIR/<row>.trace.json (train --profile; the twin's --profile); scripts/profile_summary.py sums one.
#
# The shards are random GPT-2 token ids made here (throughput does not depend on the text; the GPU node
# has no ../shared data). --device cpu --precision fp32 --model-flags "--n-layer 2 ..." checks the script
# itself without a GPU (tests/gpu_scripts_test.sh).
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

# The one-rank job's variables (the port is one that a lent node leaves free; any free port will do).
one_rank="RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517"
default_variants="defaults:"
default_variants+=";ATen loss:--cuda-loss-kernel false"
default_variants+=";ATen LayerNorm:--cuda-norm-kernel false"
default_variants+=";ATen loss + ATen LayerNorm:--cuda-loss-kernel false --cuda-norm-kernel false"
default_variants+=";flash attention:--attention flash"
default_variants+=";cuDNN attention:--attention cudnn"
default_variants+=";plain loss:--fused-loss false"
default_variants+=";CUDA graph:--cuda-graph true"
default_variants+=";one-rank NCCL, grad-accum 2:$one_rank --grad-accum 2"
default_variants+=";one-rank NCCL, ZeRO 3, grad-accum 2:$one_rank --zero 3 --grad-accum 2"
bench_options batches="16 32 64" steps=60 skip=10 seq-len=1024 model-flags="" device=cuda precision=bf16 \
  variants="$default_variants" keep="" twins="eager compile compile-reduce-overhead compile-max-autotune" \
  profile-dir="" -- "$@"
(( steps > skip && skip >= 1 )) || bench_usage_error "need --steps > --skip >= 1"
for mode in $twins; do
  case $mode in
    eager|compile|compile-reduce-overhead|compile-max-autotune) ;;
    *) bench_usage_error "--twins takes eager, compile, compile-reduce-overhead and compile-max-autotune, not '$mode'" ;;
  esac
done
twin="$repo/scripts/bench/pytorch_gpt2_gpu.py"
step_stats="$repo/scripts/bench/step_stats.py"
bench_need_built "$mygpt_bin" "$python"
if [[ $device == cuda ]]; then
  command -v nvidia-smi >/dev/null || bench_die "no nvidia-smi: this benchmark needs a GPU (or --device cpu to check the script)"
fi
bench_work_dir
if [[ -n $profile_dir ]]; then
  mkdir -p "$profile_dir" || bench_die "--profile-dir: cannot create $profile_dir"
  profile_dir=$(cd "$profile_dir" && pwd)
fi
binary="$(bench_private_copy "$mygpt_bin")"
gpu="none"
[[ $device == cuda ]] && gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)"
bench_machine_facts "GPU: $gpu"

shards="$work/shards"
mkdir -p "$shards"
"$python" - "$shards/train_000000.bin" <<'PY'
import sys
import numpy as np
count = 4_000_000
ids = np.random.default_rng(0).integers(0, 50257, size=count, dtype=np.uint16)
header = np.zeros(256, dtype=np.int32)
header[:3] = (20240520, 1, count)
with open(sys.argv[1], "wb") as f:
    f.write(header.tobytes())
    f.write(ids.tobytes())
PY

# cells METRICS: the row's statistics cells (step_stats.py --cells) over steps skip .. steps - 1.
cells() { "$python" "$step_stats" "$1" --first-step "$skip" --last-step $((steps - 1)) --cells | sed 's/|/ | /g'; }
# failure LOG: the cell of a row that did not finish.
failure() {
  if grep -qi 'out of memory' "$1"; then echo "out of memory"; else echo "failed: $(tail -n 1 "$1" | cut -c1-160)"; fi
}

table="$work/table.md"
{
  echo "| micro-batch | side: what runs | ms/step median | mean | sd | min-max | tok/s median | MFU median | peak memory (MiB) | last loss | window |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
} >"$table"
if [[ -n $keep ]]; then
  mkdir -p "$keep" || bench_die "--keep: cannot create $keep"
  cp "$table" "$keep/table.md"
fi
# add_row LINE NAME: LINE into the table, printed at once, and (--keep) the row's log and metrics kept.
add_row() {
  echo "$1" >>"$table"
  echo "ROW $1"
  [[ -n $keep ]] || return 0
  echo "$1" >>"$keep/table.md"
  cp -f "$work/$2.log" "$keep/$2.log" 2>/dev/null || true
  [[ -f $work/$2/metrics.jsonl ]] && cp -f "$work/$2/metrics.jsonl" "$keep/$2.metrics.jsonl"
  return 0
}
# A row cut off by a budget (SIGTERM from gpu_check.sh's timeout) leaves its log so far in --keep too.
current=""
trap '[[ -n $keep && -n $current ]] && cp -f "$work/$current.log" "$keep/$current.cut-off.log" 2>/dev/null; exit 143' TERM
# shellcheck disable=SC2206  # words on purpose
extra=($model_flags)
empty=" | | | | | | | | "
for batch in $batches; do
  IFS=';' read -ra variant_list <<<"$variants"
  for variant in "${variant_list[@]}"; do
    label=${variant%%:*}
    # The row's words: NAME=VALUE ones first are its environment, the rest its flags.
    row_env=() row_flags=()
    for word in ${variant#*:}; do
      if (( ${#row_flags[@]} == 0 )) && [[ $word =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then row_env+=("$word"); else row_flags+=("$word"); fi
    done
    what="${row_env[*]:+${row_env[*]} }${row_flags[*]}"
    side="C++ $label: \`${what:-no flags}\`"
    name="cpp_b${batch}_$(tr -c 'a-zA-Z0-9' _ <<<"$label")"
    echo "== C++, micro-batch $batch, $label: ${what:-no flags}"
    current=$name
    profile=()
    [[ -n $profile_dir ]] && profile=(--profile "$profile_dir/$name.trace.json")
    rc=0
    env "${row_env[@]}" "$binary" train "$shards" --preset gpt2 --device "$device" --precision "$precision" \
        --total-batch-tokens 0 --batch-size "$batch" --seq-len "$seq_len" --steps "$steps" --eval-every 0 --log-every 1 \
        --seed 1337 --final-checkpoint false "${row_flags[@]}" "${profile[@]}" "${extra[@]}" --out "$work/$name" \
        >"$work/$name.log" 2>&1 || rc=$?
    if (( rc == 0 )); then
      # A row whose loss kernel could not use ATen's widening addmm measured another path: the row says so
      # (the trainer's note, model/widening_sum.h) instead of passing for the kernel's own figure.
      grep -q 'not by the widening addmm' "$work/$name.log" && side+=" [weight-gradient sum: separate pass; ATen refused the widening addmm]"
      add_row "| $batch | $side | $(cells "$work/$name/metrics.jsonl") |" "$name"
    elif (( rc == 2 )); then
      add_row "| $batch | $side | refused by this binary: $(tail -n 1 "$work/$name.log" | cut -c1-160)$empty|" "$name"
    else
      add_row "| $batch | $side | $(failure "$work/$name.log")$empty|" "$name"
    fi
    rm -rf "${work:?}/$name"
  done
  for mode in $twins; do
    name="py_b${batch}_${mode//-/_}"
    flags=(--data "$shards" --device "$device" --precision "$precision" --batch-size "$batch" --seq-len "$seq_len"
           --steps "$steps" --skip-steps "$skip" --log-every 10 --metrics "$work/$name/metrics.jsonl" "${extra[@]}")
    mode_flags=()
    [[ $mode == compile* ]] && mode_flags+=(--compile)
    [[ $mode == compile-* ]] && mode_flags+=(--compile-mode "${mode#compile-}")
    flags+=("${mode_flags[@]}")
    side="PyTorch $mode: \`${mode_flags[*]:-no flags}\`"
    echo "== Python $mode, micro-batch $batch"
    current=$name
    [[ -n $profile_dir ]] && flags+=(--profile "$profile_dir/$name.trace.json")
    mkdir -p "$work/$name"
    if "$python" "$twin" "${flags[@]}" >"$work/$name.log" 2>&1; then
      add_row "| $batch | $side | $(cells "$work/$name/metrics.jsonl") |" "$name"
    else
      add_row "| $batch | $side | $(failure "$work/$name.log")$empty|" "$name"
    fi
    rm -rf "${work:?}/$name"
  done
done

bench_report "GPT-2 124M on one GPU, C++ vs PyTorch eager and torch.compile" "$table" \
  "GPU: $gpu; device $device, precision $precision, sequence $seq_len, $steps steps; every row over steps $skip-$((steps - 1)) of its own per-step log (scripts/bench/step_stats.py)" \
  "data: 4M random GPT-2 token ids in one llm.c shard (throughput only; losses are not comparable across sides: different random initialisation)" \
  "MFU column: the C++ trainer's own figure (n/a for the Python rows, whose tok/s compares directly)"
