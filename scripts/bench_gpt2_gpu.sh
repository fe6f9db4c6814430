#!/usr/bin/env bash
# GPT-2 124M (`--preset gpt2`: vocab 50304, T=1024, bf16 autocast, fused AdamW, flash attention) on one
# GPU, side by side in one invocation on the same torch, the same shards and the same batch:
#   C++             mygpt-ddp train SHARDS --preset gpt2 --device cuda --batch-size B, once per --variants entry
#                   (default: the ATen fused loss, the CUDA loss kernel, that with cuDNN attention, the plain loss)
#   Python eager    scripts/bench/pytorch_gpt2_gpu.py --batch-size B
#   Python compile  scripts/bench/pytorch_gpt2_gpu.py --batch-size B --compile
# for each micro-batch of --batches. Prints a markdown table (ms/step, tok/s, MFU, peak memory) and
# appends it to docs/benchmarks-log.md with the GPU, driver and versions.
#
# usage: scripts/bench_gpt2_gpu.sh [--batches "16 32 64"] [--steps 60] [--skip 10] [--seq-len 1024]
#          [--model-flags ""] [--device cuda] [--precision bf16] [--variants "LABEL:FLAGS;..."] [--no-append]
#          [--keep DIR] [--twins "eager compile"] [--profile-dir DIR]
# --keep DIR: each row's log (and the C++ rows' metrics.jsonl) is copied into DIR, and its table line
# appended to DIR/table.md, the moment the row ends (scripts/gpu_check.sh packs DIR: a run cut short by
# its budget still brings back every row that finished). Table lines are printed as they come either way.
# --profile-dir DIR: every row also writes a profiler trace of 3 steps taken after the first 10 into
# DIR/<row>.trace.json (train --profile; the twin's --profile); scripts/profile_summary.py sums one.
#
# The shards are random GPT-2 token ids made here (throughput does not depend on the text; the GPU node
# has no ../shared data). Step time is the median after the first --skip steps, each side timing one
# whole optimizer step ending in loss.item(). MFU uses 6N + attention FLOPs per token against the bf16
# dense peak of known GPUs (the C++ side's own figure; the Python rows use the same formula). A batch
# that does not fit is reported as "out of memory" for that side and the rest goes on.
# --device cpu --precision fp32 --model-flags "--n-layer 2 ..." checks the script itself without a GPU.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

# The C++ rows: LABEL:FLAGS pairs separated by ';', each measured on vs off against the first.
default_variants="aten loss:--fused-loss true;cuda loss kernel:--cuda-loss-kernel true"
default_variants+=";kernel + cudnn attention:--cuda-loss-kernel true --attention cudnn;plain loss:--fused-loss false"
bench_options batches="16 32 64" steps=60 skip=10 seq-len=1024 model-flags="" device=cuda precision=bf16 \
  variants="$default_variants" keep="" twins="eager compile" profile-dir="" -- "$@"
(( steps > skip && skip >= 1 )) || bench_usage_error "need --steps > --skip >= 1"
twin="$repo/scripts/bench/pytorch_gpt2_gpu.py"
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

# median KEY FILE [SKIP]: the median of a metrics.jsonl key over the rows after the first SKIP steps.
median() {
  "$python" - "$@" <<'PY'
import json, statistics, sys
key, path, skip = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(path) if l.strip()]
vals = [r[key] for r in rows if key in r and r.get("step", 0) >= skip and r[key] is not None]
print(f"{statistics.median(vals):.6g}" if vals else "n/a")
PY
}
# result KEY LOG: KEY of the twin's RESULT or MEMORY line.
result() { grep -hE '^(RESULT|MEMORY) ' "$2" | sed 's/^[A-Z]* //' | "$python" -c "
import json, sys
d = {}
for line in sys.stdin: d.update(json.loads(line))
v = d.get('$1')
print('n/a' if v is None else (f'{v:.6g}' if isinstance(v, float) else v))"; }

table="$work/table.md"
{
  echo "| micro-batch | side | ms/step | tok/s | MFU | peak memory (MiB) | last loss |"
  echo "|---|---|---|---|---|---|---|"
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
for batch in $batches; do
  IFS=';' read -ra variant_list <<<"$variants"
  for variant in "${variant_list[@]}"; do
    label=${variant%%:*}
    # shellcheck disable=SC2206  # words on purpose
    variant_flags=(${variant#*:})
    name="cpp_b${batch}_$(tr -c 'a-zA-Z0-9' _ <<<"$label")"
    echo "== C++, micro-batch $batch, $label: ${variant_flags[*]}"
    current=$name
    profile=()
    [[ -n $profile_dir ]] && profile=(--profile "$profile_dir/$name.trace.json")
    if "$binary" train "$shards" --preset gpt2 --device "$device" --precision "$precision" --total-batch-tokens 0 \
        --batch-size "$batch" --seq-len "$seq_len" --steps "$steps" --eval-every 0 --log-every 1 --seed 1337 --final-checkpoint false \
        "${variant_flags[@]}" "${profile[@]}" "${extra[@]}" --out "$work/$name" >"$work/$name.log" 2>&1; then
      m="$work/$name/metrics.jsonl"
      # A row whose loss kernel could not use ATen's widening addmm measured another path: the row says so
      # (the trainer's note, model/widening_sum.h) instead of passing for the kernel's own figure.
      path=""
      grep -q 'not by the widening addmm' "$work/$name.log" && path=" [weight-gradient sum: separate pass; ATen refused the widening addmm]"
      add_row "| $batch | C++ ($label)$path | $(median dt_ms "$m" "$skip") | $(median tok_per_sec "$m" "$skip") | $(median mfu "$m" "$skip") | $(median peak_mem_mib "$m" "$skip") | $(tail -n 1 "$m" | grep -o '"loss":[0-9.]*' | cut -d: -f2) |" "$name"
    else
      add_row "| $batch | C++ ($label) | $(grep -qi 'out of memory' "$work/$name.log" && echo 'out of memory' || echo "failed: $(tail -n 1 "$work/$name.log" | cut -c1-160)") | | | | |" "$name"
    fi
    rm -rf "${work:?}/$name"
  done
  for mode in $twins; do
    [[ $mode == eager || $mode == compile ]] || bench_usage_error "--twins takes eager and/or compile, not '$mode'"
    name="py_b${batch}_$mode"
    echo "== Python $mode, micro-batch $batch"
    current=$name
    flags=(--data "$shards" --device "$device" --precision "$precision" --batch-size "$batch" --seq-len "$seq_len"
           --steps "$steps" --skip-steps "$skip" --log-every 10 "${extra[@]}")
    [[ $mode == compile ]] && flags+=(--compile)
    [[ -n $profile_dir ]] && flags+=(--profile "$profile_dir/$name.trace.json")
    if "$python" "$twin" "${flags[@]}" >"$work/$name.log" 2>&1; then
      add_row "| $batch | PyTorch $mode | $(result median_dt_ms "$work/$name.log") | $(result median_tok_per_sec "$work/$name.log") | | $(result peak_memory_mib "$work/$name.log") | $(result last_loss "$work/$name.log") |" "$name"
    else
      add_row "| $batch | PyTorch $mode | $(grep -qi 'out of memory' "$work/$name.log" && echo 'out of memory' || echo "failed: $(tail -n 1 "$work/$name.log" | cut -c1-160)") | | | | |" "$name"
    fi
  done
done

bench_report "GPT-2 124M on one GPU, C++ vs PyTorch eager and torch.compile" "$table" \
  "GPU: $gpu; device $device, precision $precision, sequence $seq_len, $steps steps, median over steps >= $skip" \
  "data: 4M random GPT-2 token ids in one llm.c shard (throughput only; losses are not comparable across sides: different random initialisation)" \
  "MFU column: the C++ trainer's own figure (blank for the Python rows, whose tok/s compares directly)"
