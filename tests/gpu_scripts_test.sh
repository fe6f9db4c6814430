#!/usr/bin/env bash
# The control flow of the GPU scripts, on a machine without a GPU (as tests/slurm_test.sh tests the Slurm
# job with a fake srun): a fake nvidia-smi (and compute-sanitizer, ctest) on the PATH and --device cpu.
#   (1) scripts/torch_python.sh: PYTHON, .venv, CMake's Python, python3, in that order; one line naming
#       what was tried when none has torch; the benchmarks' common.sh finds it with no .venv
#   (2) gpu_check.sh: no GPU -> exit 2 with one line; phases run nccl memcheck on CPU write their rows,
#       facts, summary and pack; the memcheck verdict comes from the ERROR SUMMARY; tests rows from CTest;
#       the cpu phase's benchmarks against transformers (a tiny model) with --cpu-bench's data
#   (3) gpu_check.sh --budget: a step that runs too long is cut, its row says TIMEOUT, the pack is there;
#       (3b) the benchmark keeps each row as it ends, with the statistics of tests/bench_step_stats (a real
#       tiny run of both sides); (3c) each of its rows runs what its label says: a fake trainer and a fake
#       PyTorch twin record their command lines, the one-command check's bench phase runs every row
#   (4) the kit's environment (scripts/gpu_kit_env.sh): finds the node's torch and the CUDA/NCCL
#       folders beside it, refuses another torch version, names a library that resolves nowhere
#
#   bash gpu_scripts_test.sh <mygpt-ddp> <python-with-torch>
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
make_work_dir gpu_scripts
real_python=$(command -v "${2:-python3}")
fakes="$WORK/fakebin"
mkdir -p "$fakes"
# has TEXT PART...: TEXT holds every PART (checks that need no quoting of TEXT into a command line).
has() {
  local text=$1 part
  shift
  for part in "$@"; do [[ $text == *"$part"* ]] || return 1; done
}
one_line() { [[ $(printf '%s\n' "$1" | wc -l) -eq 1 ]]; }
export -f has one_line
# fake_python NAME HAS_TORCH: a "python" that answers the torch look-up with yes (0) or no (1).
fake_python() {
  printf '#!/bin/sh\nexit %s\n' "$2" >"$WORK/$1"
  chmod +x "$WORK/$1"
}

# --- (1) the Python that has torch ---------------------------------------------------------------------
source "$REPO_DIR/scripts/torch_python.sh"
repo="$WORK/repo"
mkdir -p "$repo/.venv/bin" "$repo/build"
fake_python with_torch 0
fake_python without_torch 1
empty_path="$WORK/empty_path"
mkdir -p "$empty_path"
ln -s "$WORK/without_torch" "$empty_path/python3"
got=$(PATH="$empty_path" PYTHON="$WORK/with_torch" torch_python "$repo" 2>&1)
check "(1) PYTHON wins: $got" test "$got" = "$WORK/with_torch"
got=$(PATH="$empty_path:/usr/bin:/bin" PYTHON="$WORK/without_torch" torch_python "$repo" 2>&1)
check "(1) a PYTHON without torch is refused, not replaced: $got" has "$got" "tried $WORK/without_torch;" "PYTHON names"
ln -s "$WORK/with_torch" "$repo/.venv/bin/python"
got=$(PATH="$empty_path:/usr/bin:/bin" PYTHON= torch_python "$repo" 2>&1)
check "(1) then the .venv: $got" test "$got" = "$repo/.venv/bin/python"
rm "$repo/.venv/bin/python"
fake_python cmake_python 0
echo "MYGPT_TORCH_PYTHON:FILEPATH=$WORK/cmake_python" >"$repo/build/CMakeCache.txt"
got=$(PATH="$empty_path:/usr/bin:/bin" PYTHON= torch_python "$repo" 2>&1)
check "(1) no .venv: the Python CMake was configured with: $got" test "$got" = "$WORK/cmake_python"
echo "MYGPT_TORCH_PYTHON:FILEPATH=$WORK/without_torch" >"$repo/build/CMakeCache.txt"
rm "$empty_path/python3"
ln -s "$WORK/with_torch" "$empty_path/python3"
got=$(PATH="$empty_path:/usr/bin:/bin" PYTHON= torch_python "$repo" 2>&1)
check "(1) then python3 on the PATH: $got" test "$got" = "$empty_path/python3"
rm "$empty_path/python3"
ln -s "$WORK/without_torch" "$empty_path/python3"
got=$(PATH="$empty_path:/usr/bin:/bin" PYTHON= torch_python "$repo" 2>&1)
check "(1) none: one line naming all three: $got" \
  bash -c 'one_line "$1" && has "$1" .venv/bin/python without_torch " python3;"' _ "$got"
mkdir -p "$repo/scripts/bench"
cp "$REPO_DIR/scripts/torch_python.sh" "$repo/scripts/"
cp "$REPO_DIR/scripts/bench/common.sh" "$repo/scripts/bench/"
echo "MYGPT_TORCH_PYTHON:FILEPATH=$WORK/cmake_python" >"$repo/build/CMakeCache.txt"
got=$(cd "$WORK" && PATH="$empty_path:/usr/bin:/bin" PYTHON= bash -c 'source "$1/scripts/bench/common.sh"; echo "$python"' bench "$repo")
check "(1) the benchmarks find it with no .venv: $got" test "$got" = "$WORK/cmake_python"

# --- (2) gpu_check.sh on CPU with a fake nvidia-smi ----------------------------------------------------
cat >"$fakes/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-fake)" ;;
  *"--query-gpu=name "*) echo "NVIDIA H100 80GB HBM3" ;;
  *--query-gpu=driver_version*) echo "580.00.00" ;;
  *) echo "fake nvidia-smi $*" ;;
esac
EOF
cat >"$fakes/compute-sanitizer" <<'EOF'
#!/bin/sh
# Runs the program after the options, as compute-sanitizer does; FAKE_SANITIZER_ERRORS errors reported.
if [ -n "${FAKE_SANITIZER_REFUSES:-}" ]; then  # as in a gVisor sandbox
  echo "========= Internal Sanitizer Error: The Sanitizer failed to initialize (gVisor)"; exit 255
fi
while [ "${1#--}" != "$1" ]; do shift 2; done
"$@"; rc=$?
echo "========= ERROR SUMMARY: ${FAKE_SANITIZER_ERRORS:-0} errors"
exit $rc
EOF
chmod +x "$fakes/nvidia-smi" "$fakes/compute-sanitizer"
gpu_check="$REPO_DIR/scripts/gpu_check.sh"
# A checkout whose build/ holds the binary under test: gpu_check.sh runs from there.
checkout="$WORK/checkout"
mkdir -p "$checkout/build"
cp -r "$REPO_DIR/scripts" "$REPO_DIR/tests" "$checkout/"
ln -s "$BIN" "$checkout/build/mygpt-ddp"
export PYTHON="$real_python"

run_cmd no_gpu env PATH="$empty_path:/usr/bin:/bin" bash "$checkout/scripts/gpu_check.sh" --device cpu run
check "(2) no nvidia-smi: exit 2 (exit $RC) with one line: $(cat "$WORK/no_gpu.err")" \
  bash -c "[[ $RC -eq 2 && \$(wc -l <'$WORK/no_gpu.err') -eq 1 ]] && grep -q 'no NVIDIA GPU' '$WORK/no_gpu.err'"
run_cmd bad_phase env PATH="$fakes:$PATH" bash "$checkout/scripts/gpu_check.sh" --device cpu runn
check "(2) an unknown phase: exit 2 naming it: $(cat "$WORK/bad_phase.err")" \
  bash -c "[[ $RC -eq 2 ]] && grep -q \"unknown phase 'runn'\" '$WORK/bad_phase.err'"

RUN_TIMEOUT=300
evidence="$WORK/evidence"
run_cmd cpu_check env PATH="$fakes:$PATH" bash "$checkout/scripts/gpu_check.sh" --device cpu --out "$evidence" \
  --pack "$WORK/pack" run nccl memcheck
check "(2) phases run nccl memcheck on CPU: exit 0 (exit $RC): $(tail -n 2 "$WORK/cpu_check.err")" test "$RC" -eq 0
for name in run.train run.generate run.eval run.generate_on_cpu nccl.torchrun_np2 nccl.torchrun_np2.backend nccl.mpirun_np2 nccl.mpirun_np2.backend memcheck.memcheck \
            memcheck.error_summary; do
  check "(2) ... row PASS $name" grep -qE "^PASS +$name " "$evidence/${name%%.*}/rows.txt"
done
check "(2) ... the loss kernel's tests under memcheck and racecheck: SKIP where the build has none" \
  bash -c "grep -qE '^SKIP +memcheck.loss_kernel_memcheck ' '$evidence/memcheck/rows.txt' && grep -qE '^SKIP +memcheck.loss_kernel_racecheck ' '$evidence/memcheck/rows.txt'"
check "(2) ... stalled_peer skipped with one GPU" grep -qE '^SKIP +nccl.stalled_peer ' "$evidence/nccl/rows.txt"
check "(2) ... facts name the GPU and the driver" bash -c "grep -q 'NVIDIA H100' '$evidence/facts.txt' && grep -q 'driver 580.00.00' '$evidence/facts.txt'"
check "(2) ... summary.txt gathers every row ($(grep -cE '^(PASS|FAIL|SKIP)' "$evidence/summary.txt" 2>/dev/null) rows)" \
  test "$(grep -cE '^(PASS|FAIL|SKIP)' "$evidence/summary.txt" 2>/dev/null)" -eq 13
check "(2) ... no checkpoint kept as evidence" bash -c "! find '$evidence' -name 'ckpt_*' | grep -q ."
check "(2) ... the pack: summary.txt and one tarball of the folder" \
  bash -c "cmp -s '$WORK/pack/summary.txt' '$evidence/summary.txt' && tar -tzf '$WORK/pack/gpu-run.tar.gz' | grep -q '^evidence/run/train.log$' && [[ \$(ls '$WORK/pack' | wc -l) -eq 2 ]]"

run_cmd memcheck_errors env PATH="$fakes:$PATH" FAKE_SANITIZER_ERRORS=3 bash "$checkout/scripts/gpu_check.sh" \
  --device cpu --out "$WORK/errors" memcheck
check "(2) memcheck errors in the ERROR SUMMARY: exit 1 (exit $RC), a FAIL row though the program passed" \
  bash -c "[[ $RC -eq 1 ]] && grep -qE '^FAIL +memcheck.error_summary .*3 error' '$WORK/errors/memcheck/rows.txt' && grep -qE '^PASS +memcheck.memcheck ' '$WORK/errors/memcheck/rows.txt'"

run_cmd out_taken env PATH="$fakes:$PATH" bash "$checkout/scripts/gpu_check.sh" --device cpu --out "$WORK/errors" memcheck
check "(2) an --out that holds another call's files: exit 2 naming it (exit $RC): $(cat "$WORK/out_taken.err")" \
  bash -c "[[ $RC -eq 2 && \$(wc -l <'$WORK/out_taken.err') -eq 1 ]] && grep -q -- '--out .*errors already holds files' '$WORK/out_taken.err'"

# The default folder: a checkout carries the folders committed before, of the same day and GPU too.
earlier="$checkout/evidence/gpu-runs/$(date -u +%Y-%m-%d)-h100-cpu-check"
mkdir -p "$earlier/memcheck" && echo "PASS    memcheck.earlier_call" >"$earlier/memcheck/rows.txt"
run_cmd memcheck_refused env PATH="$fakes:$PATH" FAKE_SANITIZER_REFUSES=1 bash "$checkout/scripts/gpu_check.sh" \
  --device cpu memcheck
check "(2) a machine where compute-sanitizer cannot instrument: a SKIP row with its reason, exit 0 (exit $RC)" \
  bash -c "[[ $RC -eq 0 ]] && grep -qE '^SKIP +memcheck.memcheck .*Sanitizer failed to initialize' '$earlier-2/memcheck/rows.txt'"
check "(2) ... in the default folder's first free name (-2), the earlier call's folder untouched" \
  bash -c "[[ \$(cat '$earlier/memcheck/rows.txt') == 'PASS    memcheck.earlier_call' ]] && ! grep -q earlier_call '$earlier-2/summary.txt'"

cat >"$fakes/ctest" <<'EOF'
#!/bin/sh
echo "$*" >"$FAKE_CTEST_ARGS"
echo "Test project (fake)"
echo "1/3 Test #1: Cuda.Fp32LossesEqualTheCpuRun ........   Passed    2.31 sec"
echo "2/3 Test #2: cuda_nccl_one_rank ...................***Skipped   0.05 sec"
echo "3/3 Test #3: Cuda.Bf16Training ....................***Failed    1.00 sec"
exit 8
EOF
chmod +x "$fakes/ctest"
run_cmd tests_phase env PATH="$fakes:$PATH" FAKE_CTEST_ARGS="$WORK/ctest_args" bash "$checkout/scripts/gpu_check.sh" \
  --device cpu --out "$WORK/tests" tests
check "(2) tests phase: the CUDA tests run 4 at a time, each with a timeout" \
  bash -c "grep -qE -- '-L cuda -j 4 --timeout 300' '$WORK/ctest_args'"
rows="$WORK/tests/tests/rows.txt"
check "(2) tests phase: a row per CTest test, and the failure counted (exit $RC)" \
  bash -c "[[ $RC -eq 1 ]] && grep -qE '^FAIL +tests.ctest_cuda ' '$rows' && grep -qE '^PASS +tests.Cuda.Fp32LossesEqualTheCpuRun \(2.31 s\)' '$rows' && grep -qE '^SKIP +tests.cuda_nccl_one_rank ' '$rows' && grep -qE '^FAIL +tests.Cuda.Bf16Training ' '$rows'"
rm "$fakes/ctest"

# The cpu phase (the host CPU's figures against transformers) with --cpu-bench: its pydeps/ goes first on
# PYTHONPATH (empty here: this Python's own transformers) and its data/ stands in for ../shared/data.
run_cmd cpu_bench_bad env PATH="$fakes:$PATH" bash "$checkout/scripts/gpu_check.sh" --device cpu --cpu-bench "$WORK" cpu
check "(2) --cpu-bench without pydeps/ and data/: exit 2 naming it (exit $RC): $(cat "$WORK/cpu_bench_bad.err")" \
  bash -c "[[ $RC -eq 2 && \$(wc -l <'$WORK/cpu_bench_bad.err') -eq 1 ]] && grep -q -- '--cpu-bench: .* holds no pydeps/' '$WORK/cpu_bench_bad.err'"
shared=$(test_data_dir)
cpu_bench="$WORK/cpu-bench"
mkdir -p "$cpu_bench/pydeps" "$cpu_bench/data"
ln -s "$shared/gpt2" "$cpu_bench/data/gpt2"
ln -s "$shared/tinyshakespeare.txt" "$cpu_bench/data/tinyshakespeare.txt"
if [[ ! -f $shared/gpt2/encoder.json || ! -f $shared/tinyshakespeare.txt ]]; then
  echo "SKIP (2) the cpu phase: $shared lacks gpt2/encoder.json or tinyshakespeare.txt"
elif "$real_python" -c 'import transformers' 2>/dev/null; then
  run_cmd cpu_phase env PATH="$fakes:$PATH" bash "$checkout/scripts/gpu_check.sh" --device cpu --out "$WORK/cpu_phase" \
    --cpu-bench "$cpu_bench" cpu
  check "(2) the cpu phase on a tiny model: exit 0 (exit $RC): $(tail -n 2 "$WORK/cpu_phase.err")" test "$RC" -eq 0
  for name in first_token generate_gpt2 generate_nanochat_d4; do
    check "(2) ... row PASS cpu.$name" grep -qE "^PASS +cpu.$name " "$WORK/cpu_phase/cpu/rows.txt"
  done
  check "(2) ... the logs hold the tables, the generated ids equal to transformers'" bash -c "
    grep -q '^| transformers from_pretrained + generate |' '$WORK/cpu_phase/cpu/first_token.log' &&
    grep -q 'equal to transformers' '$WORK/cpu_phase/cpu/generate_gpt2.log' &&
    grep -q 'equal to transformers' '$WORK/cpu_phase/cpu/generate_nanochat_d4.log'"
else
  run_cmd cpu_phase env PATH="$fakes:$PATH" bash "$checkout/scripts/gpu_check.sh" --device cpu --out "$WORK/cpu_phase" \
    --cpu-bench "$cpu_bench" cpu
  check "(2) the cpu phase without transformers: a SKIP row saying so" \
    grep -qE "^SKIP +cpu.first_token .*no transformers" "$WORK/cpu_phase/cpu/rows.txt"
fi

# --- (3) a step cut at the budget ----------------------------------------------------------------------
slow="$WORK/slow_kit"
mkdir -p "$slow/build"
printf '#!/bin/sh\nsleep 600\n' >"$slow/build/mygpt-ddp"
chmod +x "$slow/build/mygpt-ddp"
printf 'PYTHON=%s\nexport PYTHON\n' "$real_python" >"$slow/gpu_env.sh"
run_cmd budget env PATH="$fakes:$PATH" timeout 120 bash "$checkout/scripts/gpu_check.sh" --device cpu --kit "$slow" \
  --budget 25 --out "$WORK/budget" --pack "$WORK/budget_pack" run
check "(3) --budget 25 with a step that hangs: exit 1 within the budget (exit $RC)" test "$RC" -eq 1
check "(3) ... its row says TIMEOUT, and nothing after it ran" \
  bash -c "grep -qE '^TIMEOUT +run.train ' '$WORK/budget/run/rows.txt' && [[ \$(wc -l <'$WORK/budget/run/rows.txt') -eq 1 ]]"
check "(3) ... the pack holds the row" grep -qE '^TIMEOUT +run.train ' "$WORK/budget_pack/summary.txt"

# --- (3b) the benchmark keeps every row as it ends ----------------------------------------------------
# A tiny model on the CPU stands in for GPT-2 on a GPU: one C++ row that trains, one that fails (an
# unknown flag), the eager twin; --keep must hold each row's log, the C++ metrics and the table lines.
keep="$WORK/bench_keep"
RUN_TIMEOUT=300
run_cmd bench_keep env MYGPT_BIN="$BIN" bash "$REPO_DIR/scripts/bench_gpt2_gpu.sh" --device cpu --precision fp32 \
  --batches 2 --steps 3 --skip 1 --seq-len 32 --model-flags "--n-layer 1 --n-head 2 --n-embd 32" --no-append \
  --variants "ok:--fused-loss true;broken:--no-such-flag 1" --twins eager --keep "$keep"
check "(3b) bench --keep: exit 0 (exit $RC): $(tail -n 2 "$WORK/bench_keep.err")" test "$RC" -eq 0
# Each trained row: median, mean, sd, min-max of ms/step, tok/s, MFU, memory, loss, and the window.
stats_row='\| [0-9.,]+ \| [0-9.,]+ \| [0-9.,]+ \| [0-9.,]+-[0-9.,]+ \| [0-9,]+ \| [^|]+ \| [^|]+ \| [0-9.]+ \| steps 1-2 \(n=2\) \|$'
check "(3b) ... a table line per row, the refused one saying why" bash -c "
  grep -qE '^\| 2 \| C\+\+ ok: \`--fused-loss true\` $stats_row' '$keep/table.md' &&
  grep -qE '^\| 2 \| C\+\+ broken: \`--no-such-flag 1\` \| refused by this binary: .*no-such-flag' '$keep/table.md' &&
  grep -qE '^\| 2 \| PyTorch eager: \`no flags\` $stats_row' '$keep/table.md'"
check "(3b) ... each row's log, and both sides' per-step metrics" bash -c "
  [[ -s '$keep/cpp_b2_ok_.log' && -s '$keep/cpp_b2_ok_.metrics.jsonl' && -s '$keep/cpp_b2_broken_.log' && -s '$keep/py_b2_eager.log' && -s '$keep/py_b2_eager.metrics.jsonl' ]]"
check "(3b) ... rows printed as they come" grep -qE '^ROW \| 2 \| C\+\+ ok: ' "$WORK/bench_keep.out"

# A C++ row whose loss kernel fell back to the separate weight-gradient sum (ATen refused the widening
# addmm; the trainer's log says so) shows that path in its table line. The CPU never takes the kernel's
# path, so a wrapper adds the trainer's note to a real row's log.
printf '#!/usr/bin/env bash\n"%s" "$@"; rc=$?\necho "%s"\nexit $rc\n' "$BIN" \
  "note: the loss kernel's weight gradient is summed by a separate pass (a 16-bit product, then an fp32 add), not by the widening addmm, which ATen refused (fake): this run measures the separate pass" \
  >"$fakes/refused_addmm_trainer"
chmod +x "$fakes/refused_addmm_trainer"
run_cmd bench_refused env MYGPT_BIN="$fakes/refused_addmm_trainer" bash "$REPO_DIR/scripts/bench_gpt2_gpu.sh" \
  --device cpu --precision fp32 --batches 2 --steps 3 --skip 1 --seq-len 32 --no-append --twins "" \
  --model-flags "--n-layer 1 --n-head 2 --n-embd 32" --variants "kernel:--fused-loss true" --keep "$WORK/bench_refused"
check "(3b) a row that measured the separate weight-gradient sum says so: $(grep -m1 'C++' "$WORK/bench_refused/table.md")" \
  grep -qF '| 2 | C++ kernel: `--fused-loss true` [weight-gradient sum: separate pass; ATen refused the widening addmm] | ' \
  "$WORK/bench_refused/table.md"

# --- (3c) every bench row runs what its label says --------------------------------------------------------
# A checkout whose trainer and PyTorch twin only record their command lines (and write three steps of
# metrics): the one-command check's bench phase (gpu_check.sh bench) runs the bench's default rows.
argv_log="$WORK/argv.log"
rows_checkout="$WORK/rows_checkout"
mkdir -p "$rows_checkout/build"
cp -r "$REPO_DIR/scripts" "$rows_checkout/"
cat >"$rows_checkout/build/mygpt-ddp" <<'EOF'
#!/usr/bin/env bash
# Records its command line and launch variables; refuses --zero 3 as a binary without stage 3 does.
echo "CPP RANK=${RANK-} WORLD_SIZE=${WORLD_SIZE-} MASTER_PORT=${MASTER_PORT-} | $*" >>"$FAKE_ARGV_LOG"
[[ " $* " == *" --zero 3 "* ]] && { echo "mygpt-ddp train: --zero must be 0 or 1, got 3" >&2; exit 2; }
out=${*: -1} steps=0 prev=""
for arg in "$@"; do [[ $prev == --steps ]] && steps=$arg; prev=$arg; done
mkdir -p "$out"
for ((step = 0; step < steps; ++step)); do
  echo "{\"step\": $step, \"loss\": 2.5, \"dt_ms\": 1$((step % 2)).0, \"tok_per_sec\": 1000, \"peak_mem_mib\": 7, \"mfu\": 0.25}"
done >"$out/metrics.jsonl"
EOF
cat >"$rows_checkout/scripts/bench/pytorch_gpt2_gpu.py" <<'EOF'
import json, os, sys
with open(os.environ["FAKE_ARGV_LOG"], "a") as f:
    f.write("TWIN | " + " ".join(sys.argv[1:]) + "\n")
with open(sys.argv[sys.argv.index("--metrics") + 1], "w") as f:
    for step in range(int(sys.argv[sys.argv.index("--steps") + 1])):
        f.write(json.dumps({"step": step, "loss": 2.5, "dt_ms": 10.0 + step % 2, "tok_per_sec": 1000}) + "\n")
EOF
chmod +x "$rows_checkout/build/mygpt-ddp"
run_cmd bench_rows env PATH="$fakes:$PATH" FAKE_ARGV_LOG="$argv_log" bash "$rows_checkout/scripts/gpu_check.sh" \
  --device cpu --out "$WORK/bench_rows" bench
check "(3c) gpu_check.sh bench with the default rows: exit 0 (exit $RC): $(tail -n 2 "$WORK/bench_rows.err")" test "$RC" -eq 0
table="$WORK/bench_rows/bench/rows/table.md"
# What sets a row apart; each row must hold exactly its own among these.
distinct=("--cuda-loss-kernel false" "--cuda-norm-kernel false" "--attention flash" "--attention cudnn" "--fused-loss false"
          "--cuda-graph true" "--grad-accum 2" "--zero 3" "RANK=0 WORLD_SIZE=1 MASTER_PORT=29517")
# expect_row LABEL PART...: the row LABEL ran with exactly those PARTs of `distinct`, and its table line
# names them.
expect_row() {
  local label=$1 line part want
  shift
  line=$(grep -E "/cpp_b32_$(tr -c 'a-zA-Z0-9' _ <<<"$label")\$" "$argv_log")
  check "(3c) row '$label' ran once" test "$(grep -c . <<<"$line")" -eq 1
  for part in "${distinct[@]}"; do
    want=0
    for p in "$@"; do [[ $p == "$part" ]] && want=1; done
    if (( want )); then
      check "(3c) ... with $part" has "$line" "$part"
    else
      check "(3c) ... without $part" bash -c '[[ $1 != *"$2"* ]]' _ "$line" "$part"
    fi
  done
  check "(3c) ... its table line names what it ran" grep -qF "| 32 | C++ $label: \`" "$table"
}
expect_row "defaults"
expect_row "ATen loss" "--cuda-loss-kernel false"
expect_row "ATen LayerNorm" "--cuda-norm-kernel false"
expect_row "ATen loss + ATen LayerNorm" "--cuda-loss-kernel false" "--cuda-norm-kernel false"
expect_row "flash attention" "--attention flash"
expect_row "cuDNN attention" "--attention cudnn"
expect_row "plain loss" "--fused-loss false"
expect_row "CUDA graph" "--cuda-graph true"
expect_row "one-rank NCCL, grad-accum 2" "--grad-accum 2" "RANK=0 WORLD_SIZE=1 MASTER_PORT=29517"
expect_row "one-rank NCCL, ZeRO 3, grad-accum 2" "--grad-accum 2" "--zero 3" "RANK=0 WORLD_SIZE=1 MASTER_PORT=29517"
check "(3c) no two C++ rows run the same command" \
  test "$(grep '^CPP' "$argv_log" | sed 's#/cpp_b32_[A-Za-z0-9_]*$##' | sort | uniq -d | wc -l)" -eq 0
check "(3c) a row the binary refuses says so, and the bench goes on" \
  grep -qE '^\| 32 \| C\+\+ one-rank NCCL, ZeRO 3, grad-accum 2: .* \| refused by this binary: mygpt-ddp train: --zero must be 0 or 1, got 3 \|' "$table"
# The twins: eager, then torch.compile's default, reduce-overhead and max-autotune modes.
twin_line() { grep "^TWIN .*/py_b32_$1/metrics.jsonl" "$argv_log"; }
check "(3c) twin eager: no --compile" bash -c '[[ -n $1 && $1 != *--compile* ]]' _ "$(twin_line eager)"
check "(3c) twin compile: --compile in its default mode" bash -c '[[ $1 == *"--compile"* && $1 != *--compile-mode* ]]' _ "$(twin_line compile)"
check "(3c) twin compile-reduce-overhead" has "$(twin_line compile_reduce_overhead)" "--compile --compile-mode reduce-overhead"
check "(3c) twin compile-max-autotune" has "$(twin_line compile_max_autotune)" "--compile --compile-mode max-autotune"
# 60 steps of 10 and 11 ms in turn, the first 10 left out: median and mean 10.5, sd sqrt(50 * 0.25 / 49).
check "(3c) every row gives median, mean, sd and range over steps 10-59 (the bench's defaults): $(grep -m1 'C++ defaults' "$table")" \
  bash -c "[[ \$(grep -cF '| 10.50 | 10.50 | 0.51 | 10.00-11.00 | 1,000 |' '$table') -eq 13 ]] && grep -qF '| 25.0% | 7 | 2.5000 | steps 10-59 (n=50) |' '$table'"
check "(3c) every table line has the header's 11 columns" \
  bash -c "! awk -F'|' 'NR > 0 && NF != 13 { bad = 1 } END { exit !bad }' '$table'"

# --- (4) the kit's library search ----------------------------------------------------------------------
kit="$WORK/kit"
site="$WORK/site"
mkdir -p "$kit/build/tests" "$kit/src/scripts" "$site/torch/lib" "$site/nvidia/nccl/lib" "$site/nvidia/cu13/lib"
cp "$REPO_DIR/scripts/gpu_kit_env.sh" "$kit/gpu_env.sh"
cp "$REPO_DIR/scripts/torch_python.sh" "$kit/src/scripts/"
: >"$kit/env.sh"
printf 'mygpt-ddp GPU kit (test)\ntorch 2.11.0+cu130\n' >"$kit/KIT.txt"
echo "__version__ = '2.11.0+cu130'" >"$site/torch/version.py"
: >"$site/torch/__init__.py"
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$site" "$real_python" >"$WORK/node_python"
chmod +x "$WORK/node_python"
# A binary that needs a library only the node's torch folder holds.
printf 'int mygpt_fake_torch(void) { return 7; }\n' >"$WORK/faketorch.c"
printf 'int mygpt_fake_torch(void);\nint main(void) { return mygpt_fake_torch() == 7 ? 0 : 1; }\n' >"$WORK/main.c"
if cc -shared -fPIC -o "$site/torch/lib/libfaketorch.so" "$WORK/faketorch.c" 2>/dev/null &&
   cc -o "$kit/build/mygpt-ddp" "$WORK/main.c" -L"$site/torch/lib" -lfaketorch 2>/dev/null; then
  cp "$kit/build/mygpt-ddp" "$kit/build/tests/mygpt_cuda_tests"
  got=$(PYTHON="$WORK/node_python" bash -c 'source "$1/gpu_env.sh" && echo "$LD_LIBRARY_PATH" && "$1/build/mygpt-ddp" && echo ran' kit "$kit" 2>&1)
  check "(4) the kit finds the node's torch, and the CUDA/NCCL folders beside it: $(echo "$got" | tr '\n' ' ')" \
    has "$got" "$site/torch/lib:$site/nvidia/cu13/lib:$site/nvidia/nccl/lib" $'\nran'
  got=$(LD_LIBRARY_PATH=/node/cuda/lib64 PYTHON="$WORK/node_python" bash -c 'source "$1/gpu_env.sh" && echo "$LD_LIBRARY_PATH"' kit "$kit" 2>&1)
  check "(4) the node's own LD_LIBRARY_PATH comes after torch's libraries: $got" \
    has "$got" "$site/nvidia/nccl/lib:/node/cuda/lib64"
  echo "__version__ = '2.12.0+cu130'" >"$site/torch/version.py"
  got=$(PYTHON="$WORK/node_python" bash -c 'source "$1/gpu_env.sh"' kit "$kit" 2>&1)
  check "(4) another torch version is refused in one line: $got" \
    bash -c 'one_line "$1" && has "$1" "torch 2.11.0+cu130" "torch 2.12.0+cu130" --offline' _ "$got"
  echo "__version__ = '2.11.0+cu130'" >"$site/torch/version.py"
  mv "$site/torch/lib/libfaketorch.so" "$WORK/"
  got=$(PYTHON="$WORK/node_python" bash -c 'source "$1/gpu_env.sh"' kit "$kit" 2>&1)
  check "(4) a library found nowhere is named: $got" has "$got" libfaketorch.so
else
  skip "(4) no C compiler to make a test binary"
fi
finish
