#!/usr/bin/env bash
# train --profile FILE and scripts/profile_summary.py: a CPU run writes a whole Chrome trace of the
# profiled steps (also when the run ends inside the window), and nothing else; the summary sums a GPU
# trace's kernels by kind with its idle gaps (a trace made here with known times), lists a CPU trace's
# operators, and refuses bad input with one line and exit 2.
# Usage: profile_test.sh MYGPT_DDP PYTHON
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
PY=${2:-python3}
make_work_dir profile
SUMMARY="$REPO_DIR/scripts/profile_summary.py"

if expect_ok trained train builtin:sort --preset tiny --steps 14 --eval-every 0 --device cpu --threads 1 \
    --out "$WORK/run" --profile "$WORK/trace.json"; then
  check "the log says which steps were traced: $(grep '^profile:' "$WORK/trained.out")" \
    grep -q "^profile: steps 10-12 traced into $WORK/trace.json" "$WORK/trained.out"
  check "... into a Chrome trace of CPU operators" "$PY" -c "
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if any(e.get('cat') == 'cpu_op' and e.get('name') == 'aten::mm' for e in d['traceEvents']) else 1)" "$WORK/trace.json"
  check "... and no temporary file beside it" test -z "$(find "$WORK" -maxdepth 1 -name '*.tmp')"
  run_cmd cpu_summary "$PY" "$SUMMARY" "$WORK/trace.json"
  check "the summary of a CPU trace lists its operators (exit $RC)" \
    bash -c "[[ $RC -eq 0 ]] && grep -q '^CPU operators: ' '$WORK/cpu_summary.out' && grep -q 'aten::mm' '$WORK/cpu_summary.out'"
fi
if expect_ok short train builtin:sort --preset tiny --steps 2 --eval-every 0 --device cpu --threads 1 \
    --out "$WORK/short" --profile "$WORK/short.json" --profile-steps 3; then
  check "a run shorter than the window traces what it ran: $(grep '^profile:' "$WORK/short.out")" \
    bash -c "[[ -s '$WORK/short.json' ]] && grep -q '^profile: steps 0-1 traced' '$WORK/short.out'"
fi
expect_bad_input profile_no_folder "^mygpt-ddp: error: --profile $WORK/none/t.json: folder $WORK/none does not exist$" "" \
  train builtin:sort --steps 2 --out "$WORK/bad1" --profile "$WORK/none/t.json"
expect_bad_input profile_a_folder "^mygpt-ddp: error: --profile $WORK is a folder, not a file$" "" \
  train builtin:sort --steps 2 --out "$WORK/bad2" --profile "$WORK"
expect_bad_input profile_steps_zero "--profile-steps" "" train builtin:sort --steps 2 --out "$WORK/bad3" --profile-steps 0

# A GPU trace with known times (microseconds), 2 steps: kernels 0-10 (matmul), 10-14 (add), 20-30 (matmul),
# 25-28 (overlapping reduction), a copy 40-42; window 0-42, busy 10+4+10+2 = 26, gaps 16.
cat >"$WORK/gpu.json" <<'JSON'
{"traceEvents": [
 {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "ts": 0, "dur": 10},
 {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >", "ts": 10, "dur": 4},
 {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NTN", "ts": 20, "dur": 10},
 {"ph": "X", "cat": "kernel", "name": "void at::native::reduce_kernel<128, 4>", "ts": 25, "dur": 3},
 {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "ts": 40, "dur": 2},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}
]}
JSON
run_cmd gpu_summary "$PY" "$SUMMARY" "$WORK/gpu.json" --steps 2
check "a GPU trace: window and busy time per step (exit $RC): $(head -n 1 "$WORK/gpu_summary.out")" \
  grep -q "^GPU kernels: 5 over 2 step(s); from the first kernel's start to the last one's end 0.02 ms per step, the GPU busy 0.01 ms (61.9%)" "$WORK/gpu_summary.out"
check "... matrix products, elementwise, reductions and copies by kind" bash -c "
  grep -q '^| matrix products | 0.01 | 47.6% | 1 |' '$WORK/gpu_summary.out' &&
  grep -q '^| other elementwise | 0.00 | 9.5% | 0 |' '$WORK/gpu_summary.out' &&
  grep -q '^| reductions | 0.00 | 7.1% | 0 |' '$WORK/gpu_summary.out' &&
  grep -q '^| copies and fills | 0.00 | 4.8% | 0 |' '$WORK/gpu_summary.out'"
check "... and the idle gaps between kernels (16 of 42)" grep -q '^| idle gaps between kernels | 0.01 | 38.1% | |' "$WORK/gpu_summary.out"

echo '{"traceEvents": 3}' >"$WORK/not_trace.json"
for bad in "$WORK/missing.json" "$WORK/not_trace.json" "$WORK/gpu_summary.out"; do
  run_cmd bad_summary "$PY" "$SUMMARY" "$bad"
  check "profile_summary.py $(basename "$bad"): exit 2 with one line (exit $RC): $(cat "$WORK/bad_summary.err")" \
    bash -c "[[ $RC -eq 2 && \$(wc -l <'$WORK/bad_summary.err') -eq 1 ]] && grep -q '$(basename "$bad")' '$WORK/bad_summary.err'"
done
finish
