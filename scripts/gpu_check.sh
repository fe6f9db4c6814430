#!/usr/bin/env bash
# Checks and benchmarks a GPU machine reached briefly and without network (docs/GPU_SESSION.md), in phases
# that can also run in separate sessions, each writing its PASS/FAIL rows as its steps finish:
#   tests     ctest -L cuda -j 4: the CUDA and NCCL tests, each under a CTest timeout
#   run       a short builtin:sort run on cuda: trains, checkpoints, samples, evaluates, samples on CPU
#   family    the same for the modern members of the model family (nanochat-d2: rotary, RMSNorm without
#             gains, QK-norm, ReLU^2, untied head, soft-cap; llama-small: SwiGLU, grouped-query attention)
#   nccl      torchrun, then mpirun (where there is one), -np <GPUs> on NCCL (one GPU: the whole multi-rank
#             path with one rank); 2+ GPUs: a stalled peer must end the job
#   memcheck  compute-sanitizer memcheck on a few steps, judged by its ERROR SUMMARY
#   bench     scripts/bench_gpt2_gpu.sh: GPT-2 124M, the C++ rows that split the step's time (defaults; ATen's
#             loss; ATen's LayerNorm; neither kernel; cuDNN attention; the plain loss; --cuda-graph; the
#             one-rank NCCL path with --grad-accum 2, and with --zero 3 where the binary has it) against
#             PyTorch eager and torch.compile's default, reduce-overhead and max-autotune modes; minutes
#   profile   a profiler trace of 3 GPT-2 steps of the C++ default (or --profile-variants) and of
#             torch.compile's twin (the bench's --batches' first), each summed by scripts/profile_summary.py (kernels by kind, idle gaps)
#   cpu       the host CPU, no GPU, one thread (a lent node's host is an Intel Xeon): time to the first
#             token (scripts/bench_load.sh) and greedy generation of GPT-2 124M and nanochat-d4
#             (scripts/bench_generate.sh), each against transformers; needs transformers for the node's
#             Python: --cpu-bench DIR brings it (scripts/cpu_bench_kit.sh)
# Default phases: tests run nccl memcheck. The raw material of the run (nvidia-smi, versions of driver,
# CUDA, torch and NCCL, the rows, every log) goes to the evidence folder evidence/gpu-runs/<date>-<gpu>/,
# one subfolder per phase, with summary.txt gathering the rows of every phase there.
#
# usage: scripts/gpu_check.sh [options] [PHASE...]
#   --kit DIR        use the prebuilt kit of scripts/gpu_kit.sh (unpacked) instead of build/
#   --out DIR        evidence folder, empty or new (default evidence/gpu-runs/<UTC date>-<gpu>, or its first
#                    free -2, -3, ... where a folder of that name holds files already)
#   --pack DIR       after every row, DIR/summary.txt and DIR/gpu-run.tar.gz (the evidence folder): few
#                    files, so a device call brings them back even when it is cut off
#   --budget SECONDS stop every step in time to finish within SECONDS (its row says TIMEOUT)
#   --device cuda|cpu   cpu checks this script's control flow on a machine without a GPU
#   --batches "16 32"   micro-batches of the bench phase (default 32, what one call can afford)
#   --tests-budget SECONDS  at most SECONDS for the tests phase's ctest (a hung test must not eat the
#                    bench's minutes: CTest's own per-test TIMEOUT is 300 s)
#   --bench-steps N     steps of each bench row (bench_gpt2_gpu.sh's --steps; its default otherwise)
#   --variants "L:FLAGS;..."  the bench's C++ rows (bench_gpt2_gpu.sh's --variants; default: all of its rows)
#   --twins "eager compile ..."  the bench's PyTorch rows (bench_gpt2_gpu.sh's --twins; default: eager, compile,
#                    compile-reduce-overhead, compile-max-autotune, the slowest to compile last; "none" for none)
#   --profile-variants "L:FLAGS;..."  the C++ rows the profile phase traces (default "defaults:")
#   --cpu-bench DIR  the cpu phase's Python packages (DIR/pydeps, put first on PYTHONPATH) and data
#                    (DIR/data: GPT-2's vocabulary, Tiny Shakespeare); the unpacked cpu-bench tarball
#   --summarize DIR  rebuild DIR/summary.txt from its phases' rows (after unpacking several calls' packs)
# Exit status: 0 when nothing failed, 1 when a step failed or timed out, 2 for bad usage or no GPU.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
all_phases=(tests run family nccl memcheck bench profile cpu)
kit="" out="" pack="" budget=0 device=cuda batches="32" bench_steps="" variants="" twins="" tests_budget=0
profile_variants="defaults:" cpu_bench=""
phases=()
usage_error() { echo "gpu_check.sh: $*" >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || usage_error "$1 needs a value"; }

# summarize DIR: summary.txt from the phases' rows.txt, in phase order.
summarize() {
  local dir=$1 phase
  {
    if [[ -f $dir/facts.txt ]]; then sed -n '1,3p' "$dir/facts.txt"; echo; fi
    for phase in "${all_phases[@]}"; do
      if [[ -f $dir/$phase/rows.txt ]]; then cat "$dir/$phase/rows.txt"; fi
    done
  } >"$dir/summary.txt.new"
  mv -f "$dir/summary.txt.new" "$dir/summary.txt"
}

while (( $# )); do
  case "$1" in
    --kit) need_value "$@"; kit=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --pack) need_value "$@"; pack=$2; shift 2 ;;
    --budget) need_value "$@"; [[ $2 =~ ^[0-9]+$ ]] || usage_error "--budget takes whole seconds, not '$2'"; budget=$2; shift 2 ;;
    --device) need_value "$@"; [[ $2 == cuda || $2 == cpu ]] || usage_error "--device is cuda or cpu, not '$2'"; device=$2; shift 2 ;;
    --batches) need_value "$@"; batches=$2; shift 2 ;;
    --tests-budget) need_value "$@"; [[ $2 =~ ^[0-9]+$ ]] || usage_error "--tests-budget takes whole seconds, not '$2'"; tests_budget=$2; shift 2 ;;
    --bench-steps) need_value "$@"; [[ $2 =~ ^[0-9]+$ ]] || usage_error "--bench-steps takes a whole number, not '$2'"; bench_steps=$2; shift 2 ;;
    --variants) need_value "$@"; variants=$2; shift 2 ;;
    --profile-variants) need_value "$@"; profile_variants=$2; shift 2 ;;
    --cpu-bench) need_value "$@"; [[ -d $2/pydeps && -d $2/data ]] || usage_error "--cpu-bench: $2 holds no pydeps/ and data/ (unpack the tarball of scripts/cpu_bench_kit.sh)"; cpu_bench=$(cd "$2" && pwd); shift 2 ;;
    --twins) need_value "$@"; twins=$2; [[ $twins == none ]] && twins=" "; shift 2 ;;
    --summarize) need_value "$@"; [[ -d $2 ]] || usage_error "--summarize: $2 is not a folder"; summarize "$2"; cat "$2/summary.txt"; exit 0 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) usage_error "unknown option '$1' (see --help)" ;;
    *) [[ " ${all_phases[*]} " == *" $1 "* ]] || usage_error "unknown phase '$1' (phases: ${all_phases[*]})"
       phases+=("$1"); shift ;;
  esac
done
(( ${#phases[@]} )) || phases=(tests run nccl memcheck)

# --- the binaries: a kit (its env.sh finds the node's torch) or this checkout's build ---------------
if [[ -n $kit ]]; then
  [[ -f $kit/gpu_env.sh ]] || usage_error "--kit: $kit/gpu_env.sh is missing (unpack the tarball of scripts/gpu_kit.sh)"
  kit=$(cd "$kit" && pwd)
  # shellcheck disable=SC1091
  source "$kit/gpu_env.sh" || exit 2
  build="$kit/build"
else
  build="$repo/build"
  # shellcheck source=scripts/mpi_env.sh
  source "$repo/scripts/mpi_env.sh"
  # shellcheck source=scripts/torch_python.sh
  source "$repo/scripts/torch_python.sh"
  PYTHON=$(torch_python "$repo") || exit 2
  export PYTHON
fi
bin="$build/mygpt-ddp"
[[ -x $bin ]] || usage_error "$bin is missing: run scripts/setup.sh (or --offline), or give --kit"
export MYGPT_BIN=$bin  # scripts/bench/common.sh runs this binary

# After the binaries (a kit that cannot run on this node says so first, even without a GPU).
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check.sh: no NVIDIA GPU visible (nvidia-smi -L fails): run it on a GPU node" >&2
  exit 2
fi
gpus=$(nvidia-smi -L | grep -c '^GPU')
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)

# --- the evidence folder ------------------------------------------------------------------------------
if [[ -z $out ]]; then
  slug=$(echo "$gpu_name" | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/[^a-z0-9]\{1,\}/-/g' | cut -d- -f1)
  (( gpus > 1 )) && slug="${gpus}x$slug"
  [[ $device == cpu ]] && slug="$slug-cpu-check"
  # A call never writes into another call's folder (a checkout carries the folders committed before,
  # possibly of the same day and GPU): the first of <date>-<gpu>, -2, -3, ... that holds nothing.
  base="$repo/evidence/gpu-runs/$(date -u +%Y-%m-%d)-$slug" out=$base n=1
  while [[ -n $(ls -A "$out" 2>/dev/null) ]]; do n=$((n + 1)); out="$base-$n"; done
elif [[ -n $(ls -A "$out" 2>/dev/null) ]]; then
  usage_error "--out $out already holds files (another call's evidence?): name an empty or new folder"
fi
mkdir -p "$out" || usage_error "cannot create $out"
out=$(cd "$out" && pwd)
[[ -z $pack ]] || mkdir -p "$pack" || usage_error "cannot create $pack"
start=$SECONDS
failures=0

pack_up() {
  summarize "$out"
  [[ -n $pack ]] || return 0
  cp -f "$out/summary.txt" "$pack/summary.txt"
  tar -czf "$pack/gpu-run.tar.gz.new" -C "$(dirname "$out")" "$(basename "$out")" && mv -f "$pack/gpu-run.tar.gz.new" "$pack/gpu-run.tar.gz"
}

# row PHASE VERDICT NAME DETAIL: one line in PHASE/rows.txt, printed, and packed at once.
row() {
  local line
  line=$(printf '%-7s %-28s %s' "$2" "$1.$3" "$4")
  echo "$line"
  echo "$line" >>"$out/$1/rows.txt"
  [[ $2 == FAIL || $2 == TIMEOUT ]] && failures=$((failures + 1))
  pack_up
}

# step PHASE NAME COMMAND...: runs COMMAND (output in PHASE/NAME.log) within the budget left; a row.
step() {
  local phase=$1 name=$2 t0=$SECONDS rc limit=0
  shift 2
  if (( budget > 0 )); then
    limit=$(( budget - (SECONDS - start) - 15 ))  # 15 s to write and pack the rows
    (( limit > 0 )) || { row "$phase" TIMEOUT "$name" "not started: --budget $budget s used up"; return 1; }
  fi
  # A step's own cap (step_cap, set by its phase) when it is lower than what the budget leaves.
  if (( ${step_cap:-0} > 0 )) && (( limit <= 0 || step_cap < limit )); then limit=$step_cap; fi
  echo "== $phase.$name"
  if (( limit > 0 )); then
    timeout -k 10 "$limit" "$@" >"$out/$phase/$name.log" 2>&1
  else
    "$@" >"$out/$phase/$name.log" 2>&1
  fi
  rc=$?
  step_rc=$rc
  step_took="($((SECONDS - t0)) s, log $phase/$name.log)"
  (( limit > 0 && (rc == 124 || rc == 137) )) && step_rc=124
  [[ -n ${MYGPT_STEP_NO_ROW:-} ]] && return 0  # the caller judges the log first, then calls step_verdict
  step_verdict "$phase" "$name" "$step_rc"
}
# step_verdict PHASE NAME RC: the row of a step that ended with RC (124: cut at the budget).
step_verdict() {
  local phase=$1 name=$2 rc=$3
  if (( rc == 124 )); then row "$phase" TIMEOUT "$name" "cut at the --budget $step_took"; return 1; fi
  if (( rc == 77 )); then row "$phase" SKIP "$name" "$(tail -n 1 "$out/$phase/$name.log")"; return 0; fi
  if (( rc == 0 )); then row "$phase" PASS "$name" "$step_took"; return 0; fi
  row "$phase" FAIL "$name" "exit $rc $step_took"
  return 1
}
skip() { row "$1" SKIP "$2" "$3"; }

# --- facts: what a figure depends on, written once per folder -----------------------------------------
write_facts() {
  {
    echo "gpu_check on $(uname -n) at $(date -u '+%Y-%m-%d %H:%M UTC'): $gpus x $gpu_name (device $device)"
    echo "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1) | $("$PYTHON" -c 'import torch; print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| cuDNN", torch.backends.cudnn.version(), "| NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "(no CUDA device)")' 2>&1 | tail -n 1)"
    echo "binary: $bin${kit:+ (kit: $(head -n 1 "$kit/KIT.txt" 2>/dev/null))}"
    echo
    echo "--- nvidia-smi"; nvidia-smi 2>&1
    echo "--- nvidia-smi --query-gpu"; nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv 2>&1
    echo "--- python with torch: $PYTHON"
    echo "--- nvcc"; nvcc --version 2>&1 | tail -n 2
    echo "--- compute-sanitizer"; compute-sanitizer --version 2>&1 | head -n 2
    echo "--- mpirun"; mpirun --version 2>&1 | head -n 1
    echo "--- CUDA runtime, NCCL and NVRTC as the binary resolves them"
    ldd "$bin" 2>&1 | grep -E 'libcudart|libnccl|libnvrtc|libtorch_cuda' || echo "(none: a CPU build)"
    echo "--- kernel and CPU"; uname -srm; grep -m1 'model name' /proc/cpuinfo; nproc
    [[ -n $kit ]] && { echo "--- kit"; cat "$kit/KIT.txt"; }
  } >"$out/facts.txt" 2>&1
}
[[ -f $out/facts.txt ]] || write_facts

# --- the phases ----------------------------------------------------------------------------------------
tiny=(--preset tiny --device "$device")

phase_tests() {
  local dir=$build
  # The kit's CTest files with this node's paths go to a scratch folder: they are the kit's, not evidence.
  if [[ -n $kit ]]; then
    dir=$(kit_ctest_dir "$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_ctest.XXXXXX")") ||
      { row tests FAIL ctest "no CTest files in the kit"; return; }
  fi
  # Four at a time: the tests are small next to one GPU's memory, and one at a time they cost minutes of
  # a scarce session. The ones that start whole jobs (mpirun, torchrun) share a RESOURCE_LOCK and still
  # run one after the other (tests/CMakeLists.txt).
  step_cap=$tests_budget step tests ctest_cuda ctest --test-dir "$dir" -L cuda -j 4 --timeout 300 --output-on-failure \
    --output-junit "$out/tests/junit.xml"
  # One row per test from CTest's own lines ("1/9 Test #3: Cuda.X ....   Passed    2.31 sec").
  # (A parameterized test's name is followed by "  # GetParam() = ...": the name is the first word.)
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .*[.*] *([A-Za-z][A-Za-z ]*[A-Za-z]) +([0-9.]+) sec.*/\1|\2|\3/p' \
    "$out/tests/ctest_cuda.log" | while IFS='|' read -r name verdict secs; do
      verdict=$(echo "$verdict" | tr -s ' ' | sed 's/^ *//; s/ *$//')
      case "$verdict" in
        Passed) printf '%-7s %-28s %s\n' PASS "tests.$name" "($secs s)" ;;
        Skipped|"Not Run"*) printf '%-7s %-28s %s\n' SKIP "tests.$name" "($verdict)" ;;
        *) printf '%-7s %-28s %s\n' FAIL "tests.$name" "($verdict, $secs s)" ;;
      esac
    done >>"$out/tests/rows.txt"
  pack_up
}

# sort_run PHASE PREFIX RUN STEPS MODEL_FLAG...: a builtin:sort model trained on the device, sampled greedily
# and evaluated there; rows PREFIXtrain, PREFIXgenerate, PREFIXeval (each only after the one before passed).
sort_run() {
  local phase=$1 prefix=$2 run=$3 steps=$4
  shift 4
  step "$phase" "${prefix}train" "$bin" train builtin:sort "$@" --device "$device" --threads 4 --steps "$steps" \
      --eval-every 100 --out "$run" --overwrite &&
    step "$phase" "${prefix}generate" "$bin" generate --checkpoint "$run" --prompt 902741= --max-new-tokens 7 \
      --temperature 0 --device "$device" &&
    step "$phase" "${prefix}eval" "$bin" eval --checkpoint "$run" --task builtin:sort --examples 50 --device "$device"
}

phase_run() {
  local run="$out/run/sort"
  sort_run run "" "$run" 200 --preset tiny &&
    step run generate_on_cpu "$bin" generate --checkpoint "$run" --prompt 902741= --max-new-tokens 7 --temperature 0 --device cpu
  rm -f "$run"/ckpt_*  # weights are not evidence; the logs and metrics are
}

phase_family() {
  local preset run
  for preset in nanochat-d2 llama-small; do
    run="$out/family/$preset"
    sort_run family "$preset." "$run" "${MYGPT_FAMILY_STEPS:-200}" --preset "$preset"
    rm -f "$run"/ckpt_*  # weights are not evidence
  done
}

phase_nccl() {
  local ranks=$gpus backend=nccl
  [[ $device == cpu ]] && { ranks=2; backend=gloo; }
  # One GPU: one rank, which still takes the NCCL path of a larger job (bootstrap, communicator, bucket
  # hooks, watchdog, stop flag). First without MPI: torchrun from the node's own torch, ranks meeting
  # through a c10d store (what a node with nothing but python3 and torch can run; Open MPI's plugins are
  # never loaded); then through mpirun where there is one. --comm-timeout 30: a hung collective ends the
  # step in seconds, not the 600-s default. NCCL_DEBUG=INFO: what NCCL chose, in the log.
  local run_flags=("${tiny[@]}" --threads 1 --steps 60 --eval-every 30 --comm-timeout 30 --overwrite)
  if step nccl "torchrun_np$ranks" env NCCL_DEBUG=INFO "$PYTHON" -m torch.distributed.run --standalone \
       --nproc-per-node "$ranks" --no-python "$bin" train builtin:sort "${run_flags[@]}" --out "$out/nccl/sort_torchrun"; then
    nccl_backend_row "torchrun_np$ranks" "$backend"
  fi
  rm -f "$out/nccl/sort_torchrun"/ckpt_*
  [[ $device == cpu ]] && backend=mpi
  if ! command -v mpirun >/dev/null 2>&1; then
    skip nccl "mpirun_np$ranks" "no mpirun on this node (the MPI route; torchrun's ran above)"
  elif step nccl "mpirun_np$ranks" env NCCL_DEBUG=INFO mpirun --oversubscribe --bind-to none -np "$ranks" "$bin" train \
       builtin:sort "${run_flags[@]}" --out "$out/nccl/sort_np$ranks"; then
    nccl_backend_row "mpirun_np$ranks" "$backend"
  fi
  rm -f "$out/nccl/sort_np$ranks"/ckpt_*
  if (( gpus >= 2 )) && [[ $device == cuda ]] && command -v mpirun >/dev/null 2>&1; then
    step nccl stalled_peer bash "$repo/tests/cuda/stalled_peer_test.sh" "$bin" mpirun
  else
    skip nccl stalled_peer "needs two GPUs (one rank per GPU) and mpirun"
  fi
}

# nccl_backend_row STEP BACKEND: whether the run of STEP used BACKEND (its world line says).
nccl_backend_row() {
  if grep -q "backend $2" "$out/nccl/$1.log"; then
    row nccl PASS "$1.backend" "$(grep -m1 -o "world: .*backend $2.*" "$out/nccl/$1.log")"
  else
    row nccl FAIL "$1.backend" "the run did not use the $2 backend (log nccl/$1.log)"
  fi
}

phase_memcheck() {
  if ! command -v compute-sanitizer >/dev/null 2>&1; then skip memcheck memcheck "no compute-sanitizer on the PATH"; return; fi
  # API errors that torch provokes and handles itself (probing for features) are not ours: the verdict is
  # the memory errors counted in the ERROR SUMMARY (and the program's own exit status, the step's).
  local log="$out/memcheck/memcheck.log" summary refusal
  MYGPT_STEP_NO_ROW=1 step memcheck memcheck compute-sanitizer --tool memcheck --report-api-errors no "$bin" train \
    builtin:sort "${tiny[@]}" --threads 4 --steps 3 --eval-every 0 --out "$out/memcheck/sort" --overwrite || return
  local rc=$step_rc
  rm -f "$out/memcheck/sort"/ckpt_*
  # Some virtual machines (gVisor, old kernels) refuse the sanitizer's instrumentation: it then reports no
  # summary but a line of its own, which says nothing about our kernels: a SKIP with that line.
  refusal=$(grep -m1 -E 'Internal Sanitizer Error|[Ff]ailed to initiali[sz]e|[Dd]ebugger interface|not supported on this|[Dd]evice not supported|terminated before first instrumented API call' "$log")
  if [[ -n $refusal ]] && ! grep -q 'ERROR SUMMARY' "$log"; then
    skip memcheck memcheck "compute-sanitizer cannot instrument on this machine: ${refusal#========= }"
    return
  fi
  step_verdict memcheck memcheck "$rc" || return
  summary=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$log" | tail -n 1)
  if [[ -z $summary ]]; then
    row memcheck FAIL error_summary "compute-sanitizer wrote no ERROR SUMMARY (log memcheck/memcheck.log)"
  elif [[ $summary == "ERROR SUMMARY: 0 error" ]]; then
    row memcheck PASS error_summary "${summary}s"
  else
    row memcheck FAIL error_summary "${summary}(s): see memcheck/memcheck.log"
  fi
  sanitize_loss_tests memcheck
  sanitize_loss_tests racecheck
}

# The CUDA loss kernel's own tests under compute-sanitizer's memcheck and racecheck, with PyTorch's caching
# allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1): inside a cached block an out-of-bounds access hits
# memory that is still allocated and goes unseen.
sanitize_loss_tests() {
  local tool=$1 tests="$build/tests/mygpt_cuda_loss_tests" log summary
  log="$out/memcheck/loss_kernel_$tool.log"
  [[ -x $tests ]] || { skip memcheck "loss_kernel_$tool" "no $tests"; return; }
  MYGPT_STEP_NO_ROW=1 step memcheck "loss_kernel_$tool" env PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    compute-sanitizer --tool "$tool" --report-api-errors no "$tests" || return
  step_verdict memcheck "loss_kernel_$tool" "$step_rc" || return
  if [[ $tool == racecheck ]]; then
    # racecheck also reports hazards inside cuBLAS's and cuDNN's Hopper kernels, whose TMA/wgmma barriers it
    # does not follow (seen on an H100: nvjet_sm90_* and cudnn_*_sdpa_* only); the verdict is ours: hazards
    # reported in a kernel of ours (lm_loss_*), none expected.
    summary=$(grep -o 'RACECHECK SUMMARY: .*' "$log" | tail -n 1)
    local ours
    ours=$(grep 'Race reported' "$log" | grep -c 'lm_loss\|layer_norm')
    if [[ -z $summary ]]; then
      row memcheck FAIL "loss_kernel_racecheck.ours" "no RACECHECK SUMMARY: see memcheck/loss_kernel_racecheck.log"
    elif (( ours == 0 )); then
      row memcheck PASS "loss_kernel_racecheck.ours" "no hazard in lm_loss_* or layer_norm_* ($summary, all in library kernels)"
    else
      row memcheck FAIL "loss_kernel_racecheck.ours" "$ours hazard report(s) in lm_loss_* or layer_norm_*: see memcheck/loss_kernel_racecheck.log"
    fi
    return
  fi
  summary=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$log" | tail -n 1)
  if [[ $summary == "ERROR SUMMARY: 0 error" ]]; then
    row memcheck PASS "loss_kernel_$tool.errors" "${summary}s"
  else
    row memcheck FAIL "loss_kernel_$tool.errors" "${summary:-no ERROR SUMMARY}: see memcheck/loss_kernel_$tool.log"
  fi
}

phase_profile() {
  local dir="$out/profile" trace name
  step profile traces "$repo/scripts/bench_gpt2_gpu.sh" --batches "${batches%% *}" --no-append --device "$device" \
    --steps 13 --skip 10 --variants "$profile_variants" --twins compile --profile-dir "$dir"
  for trace in "$dir"/*.trace.json; do
    [[ -f $trace ]] || continue
    name=$(basename "$trace" .trace.json)
    if "$PYTHON" "$repo/scripts/profile_summary.py" "$trace" --steps 3 >"$dir/$name.summary.md" 2>&1; then
      row profile PASS "$name" "$(head -n 1 "$dir/$name.summary.md")"
    else
      row profile FAIL "$name" "$(tail -n 1 "$dir/$name.summary.md")"
    fi
    gzip -f "$trace"  # kept for ui.perfetto.dev, a tenth of the size
  done
  pack_up
}

phase_bench() {
  # Each row's log, metrics and table line land in bench/rows/ as the row ends: a budget cut keeps them.
  step bench gpt2 "$repo/scripts/bench_gpt2_gpu.sh" --batches "$batches" --no-append --device "$device" \
    --keep "$out/bench/rows" ${bench_steps:+--steps "$bench_steps"} ${variants:+--variants "$variants"} ${twins:+--twins "$twins"}
  [[ -f $out/bench/rows/table.md ]] && { echo; cat "$out/bench/rows/table.md"; }
  pack_up
}

phase_cpu() {
  local data="$repo/../shared/data" pythonpath=${PYTHONPATH:-} ok
  local -a small=()
  if [[ -n $cpu_bench ]]; then
    data=$cpu_bench/data
    pythonpath="$cpu_bench/pydeps${pythonpath:+:$pythonpath}"  # for this phase's steps only
  fi
  local -a cpu_env=(env CUDA_VISIBLE_DEVICES= PYTHONPATH="$pythonpath")
  ok=$("${cpu_env[@]}" "$PYTHON" -c 'import transformers; print(transformers.__version__)' 2>&1 | tail -n 1)
  if [[ ! $ok =~ ^[0-9] ]]; then
    skip cpu first_token "no transformers for $PYTHON ($ok): give --cpu-bench"
    return
  fi
  # --device cpu checks this script on a machine without a GPU: a tiny model then, the flow not the figures.
  [[ $device == cpu ]] && small=(--reps 1 --model-flags "--n-layer 1 --n-head 2 --n-embd 32")
  step cpu first_token "${cpu_env[@]}" "$repo/scripts/bench_load.sh" --no-append --vocab "$data/gpt2" \
    --text "$data/tinyshakespeare.txt" "${small[@]}"
  pack_up
  [[ $device == cpu ]] && small+=(--new-tokens 8)
  step cpu generate_gpt2 "${cpu_env[@]}" "$repo/scripts/bench_generate.sh" --no-append --uncached-tokens 0 \
    --vocab "$data/gpt2" --text "$data/tinyshakespeare.txt" "${small[@]}"
  pack_up
  step cpu generate_nanochat_d4 "${cpu_env[@]}" "$repo/scripts/bench_generate.sh" --no-append \
    --uncached-tokens 0 --preset nanochat-d4 --vocab "$data/gpt2" --text "$data/tinyshakespeare.txt" "${small[@]}"
  pack_up
}

for phase in "${phases[@]}"; do
  mkdir -p "$out/$phase"
  : >"$out/$phase/rows.txt"
  "phase_$phase"
done
summarize "$out"
pack_up
echo
cat "$out/summary.txt"
echo "evidence: $out"
(( failures == 0 ))
