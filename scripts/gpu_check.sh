#!/usr/bin/env bash
# The one command that proves a GPU node: after scripts/setup.sh (or setup.sh --offline), runs
#   1. nvidia-smi -L                      the GPUs this node shows
#   2. ctest -L cuda                      the CUDA and NCCL tests (each skips where it cannot run)
#   3. a short builtin:sort run on cuda   trains, checkpoints, samples and evaluates on the GPU
#   4. a 2-rank run under mpirun          NCCL between two GPUs (only with 2 or more GPUs)
#   5. compute-sanitizer memcheck         on a few steps of a tiny run (where compute-sanitizer exists)
#   6. scripts/bench_gpt2_gpu.sh          GPT-2 124M against PyTorch eager and torch.compile (--bench)
# and prints one PASS/FAIL/SKIP table. Logs go to OUT_DIR (default gpu_check_out/).
#
# usage: scripts/gpu_check.sh [--out DIR] [--bench] [--batches "16 32"]
# Exit status: 0 when nothing failed, 1 when a check failed, 2 for bad usage or no GPU at all.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out="$repo/gpu_check_out"
bench=0
batches="16 32 64"
while (( $# )); do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { echo "gpu_check.sh: --out needs a folder" >&2; exit 2; }; out=$2; shift 2 ;;
    --bench) bench=1; shift ;;
    --batches) [[ $# -ge 2 ]] || { echo "gpu_check.sh: --batches needs a list" >&2; exit 2; }; batches=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check.sh: no NVIDIA GPU visible (nvidia-smi -L fails): run it on a GPU node" >&2
  exit 2
fi
bin="$repo/build/mygpt-ddp"
[[ -x $bin ]] || { echo "gpu_check.sh: $bin is missing: run scripts/setup.sh (or --offline) first" >&2; exit 2; }
# shellcheck source=scripts/mpi_env.sh
source "$repo/scripts/mpi_env.sh"
mkdir -p "$out"
results=()
# step NAME COMMAND...: runs COMMAND with its output in OUT/NAME.log and records PASS or FAIL.
step() {
  local name=$1
  shift
  echo "== $name"
  if "$@" >"$out/$name.log" 2>&1; then results+=("PASS  $name"); else results+=("FAIL  $name (see $out/$name.log)"); fi
}
skip_step() { results+=("SKIP  $1: $2"); }

gpus=$(nvidia-smi -L | grep -c '^GPU')
step nvidia_smi nvidia-smi -L
step ctest_cuda bash -c "cd '$repo/build' && ctest -L cuda --output-on-failure"
run="$out/sort_cuda"
step train_cuda bash -c "'$bin' train builtin:sort --preset tiny --steps 200 --device cuda --eval-every 100 \
  --out '$run' --overwrite && '$bin' generate --checkpoint '$run' --prompt 902741= --max-new-tokens 7 \
  --temperature 0 --device cuda && '$bin' eval --checkpoint '$run' --task builtin:sort --examples 50 --device cuda \
  && '$bin' generate --checkpoint '$run' --prompt 902741= --max-new-tokens 7 --temperature 0 --device cpu"
if (( gpus >= 2 )); then
  step nccl_two_ranks "${MYGPT_MPIRUN[@]}" -np 2 "$bin" train builtin:sort --preset tiny --steps 100 --device cuda \
    --eval-every 50 --out "$out/sort_nccl" --overwrite
else
  skip_step nccl_two_ranks "one GPU: the NCCL that torch ships refuses two ranks on one device"
fi
if command -v compute-sanitizer >/dev/null 2>&1; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "$bin" train builtin:sort --preset tiny \
    --steps 3 --device cuda --eval-every 0 --out "$out/sort_memcheck" --overwrite
else
  skip_step memcheck "no compute-sanitizer on the PATH"
fi
if (( bench )); then
  step bench_gpt2 "$repo/scripts/bench_gpt2_gpu.sh" --batches "$batches"
else
  skip_step bench_gpt2 "give --bench to run scripts/bench_gpt2_gpu.sh (minutes)"
fi

echo
echo "gpu_check: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1) x $gpus"
printf '%s\n' "${results[@]}" | tee "$out/summary.txt"
printf '%s\n' "${results[@]}" | grep -q '^FAIL' && exit 1
exit 0
