#!/usr/bin/env bash
# nanochat's CORE metric and bits per byte through the binary (issue 56), against a reference written from
# the issue's description (tests/core_reference.py: transformers on the exported model):
#   - a synthetic bundle (every task type, both delimiters, a crop at the tiny preset's 32-token block, a
#     task smaller than its shots, Unicode): eval --core's per-task accuracies == the reference's, on our
#     checkpoint and on its Hugging Face export; --core-max-per-task too; --json as the issue gives it;
#   - bits per byte of eval --val == the sums of per-token nats and token bytes done in Python;
#   - 2 and 3 ranks (mpirun) print the numbers of one, for CORE and for bpb; train --zero 3 scores
#     HellaSwag and CORE as --zero 0 does (a rank out of items sits out while the others gather);
#   - train --core / validation: metrics.jsonl carries core and val_bpb, plot_run.py draws them;
#   - the sorting task posed as multiple choice (the sorted digits among three unsorted permutations): a
#     model trained on it scores near 100%, an untrained one far below;
#   - bad bundles: exit 2 and one line naming the file (and line).
# Usage: core_end_to_end.sh MYGPT_DDP PYTHON MPIEXEC
# The transformers parts skip where the python lacks transformers or tokenizers; mpirun parts without mpirun.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
PY=${2:-python3}
use_mpirun "${3:-mpirun}"
make_work_dir core
REF=$TESTS_DIR/core_reference.py
CPU=(--device cpu --threads 1)
RUN_TIMEOUT=300

# --- bad bundles: one line naming the file (and the line of a JSON lines file), exit 2 ----------------
"$PY" "$REF" bad_bundles "$WORK/bad" || { fail "core_reference.py bad_bundles"; finish; }
if expect_ok sort_untrained train builtin:sort --preset tiny --steps 1 --eval-every 0 "${CPU[@]}" --out "$WORK/untrained"; then
  while read -r name pattern; do
    expect_bad "bad_$name" "$pattern" eval --checkpoint "$WORK/untrained" --core "$WORK/bad/$name" "${CPU[@]}" &&
      pass "bad bundle $name: exit 2, one line: $(cat "$WORK/bad_$name.err")"
  done <<'LIST'
no_yaml core\.yaml
no_csv eval_meta_data\.csv
no_data t\.jsonl
bad_yaml core\.yaml: bad YAML
unknown_type core\.yaml: task 't' has icl_task_type 'ranking'
absent_from_csv eval_meta_data\.csv: has no "Eval Task" row for task 't'
gold_out_of_range t\.jsonl:3: .*"gold" 2 is outside 0\.\.1
empty_choices t\.jsonl:3: .*"choices" is empty
not_utf8 t\.jsonl:3: not UTF-8
LIST
  expect_bad core_missing_dir "--core '.*nope' is not a folder" eval --checkpoint "$WORK/untrained" --core "$WORK/nope" "${CPU[@]}" &&
    pass "a --core that is no folder: exit 2, one line"
  expect_bad core_json_elsewhere "--json .*--core" eval --checkpoint "$WORK/untrained" --task builtin:sort --json "$WORK/x.json" "${CPU[@]}" &&
    pass "--json without --core is refused"
fi

# --- the sorting task as multiple choice: trained ~100%, untrained near chance -------------------------
"$PY" "$REF" sort_bundle "$WORK/sort" 100
if expect_ok sort_train train builtin:sort --preset tiny --steps 300 --eval-every 0 "${CPU[@]}" --out "$WORK/sorted"; then
  if expect_ok sort_core eval --checkpoint "$WORK/sorted" --core "$WORK/sort" "${CPU[@]}" &&
     expect_ok sort_core0 eval --checkpoint "$WORK/untrained" --core "$WORK/sort" "${CPU[@]}"; then
    trained=$(awk '$1 == "sort_mc" {print $3}' "$WORK/sort_core.out")
    untrained=$(awk '$1 == "sort_mc" {print $3}' "$WORK/sort_core0.out")
    check "a model trained on sorting scores near 100% on it as multiple choice ($trained)" \
      awk -v a="$trained" 'BEGIN {exit !(a >= 0.9)}'
    check "an untrained one far below, towards chance, 25% ($untrained)" awk -v a="$untrained" 'BEGIN {exit !(a <= 0.6)}'
    check "a tokenizer without BOS is said so" grep -q "no BOS token" "$WORK/sort_core.out"
  fi
fi

# --- the synthetic bundle on a tokenizer.json model: ours == the reference -----------------------------
if ! "$PY" -c "import transformers, tokenizers, yaml, torch" >/dev/null 2>&1; then
  skip "the reference comparisons (the python $PY lacks transformers, tokenizers, yaml or torch)"
  finish
fi
"$PY" "$REF" bundle "$WORK/bundle" || { fail "core_reference.py bundle"; finish; }
"$PY" "$TESTS_DIR/tokenizer_reference.py" make-gpt4 "$WORK/bundle/text.txt" "$WORK/tok" || { fail "make-gpt4"; finish; }
TRAIN=(train "$WORK/bundle/text.txt" --vocab "$WORK/tok" --preset tiny --batch-size 4 --seq-len 16 "${CPU[@]}")
if expect_ok model "${TRAIN[@]}" --steps 20 --eval-every 10 --eval-steps 2 --core "$WORK/bundle" --core-every 10 \
     --core-max-per-task 6 --out "$WORK/run"; then
  check "training's validation lines carry bits per byte" grep -qE "step 10 \| val loss: [0-9.]+ \| val bpb: [0-9.]+" "$WORK/model.out"
  check "... and CORE lines" grep -qE "step 20 \| CORE: -?[0-9.]+ \(6 tasks" "$WORK/model.out"
  check "metrics.jsonl holds val_bpb and core" \
    "$PY" -c "import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; assert any('val_bpb' in r for r in rows) and any('core' in r and len(r['core_tasks']) == 6 for r in rows)" "$WORK/run/metrics.jsonl"
  check "the tiny task's note: fewer items than shots" grep -q "CORE task tiny_task scores 3 item(s), fewer than its 5 shots" "$WORK/model.out"
  if "$PY" -c "import matplotlib" >/dev/null 2>&1; then
    run_cmd plot "$PY" "$REPO_DIR/scripts/plot_run.py" "$WORK/run"
    check "plot_run.py draws validation bpb and CORE: $(grep '^panels' "$WORK/plot.out")" \
      grep -q "validation bits per byte, CORE," "$WORK/plot.out"
  fi
fi
if expect_ok export export --checkpoint "$WORK/run" --out "$WORK/hf"; then
  for max in 0 5; do
    run_cmd "ref_$max" "$PY" "$REF" score "$WORK/hf" "$WORK/bundle" "$max" "$WORK/ref_$max.json"
    check "the reference scores the export (max $max): $(cat "$WORK/ref_$max.out")" test "$RC" -eq 0
    for model in run hf; do
      if expect_ok "core_${model}_$max" eval --checkpoint "$WORK/$model" --core "$WORK/bundle" --core-max-per-task "$max" \
           --json "$WORK/ours_${model}_$max.json" "${CPU[@]}"; then
        run_cmd "same_${model}_$max" "$PY" -c "
import json, sys
ours, ref = (json.load(open(p)) for p in sys.argv[1:])
assert ours['tasks'].keys() == ref['tasks'].keys(), (ours['tasks'].keys(), ref['tasks'].keys())
for label, r in ref['tasks'].items():
    o = ours['tasks'][label]
    assert (o['type'], o['examples']) == (r['type'], r['examples']) and abs(o['accuracy'] - r['accuracy']) < 1e-12, (label, o, r)
    assert abs(o['centered'] - r['centered']) < 1e-9, (label, o, r)
assert abs(ours['core'] - ref['core']) < 1e-9
print(', '.join(f\"{k} {v['accuracy']:.3f}\" for k, v in ours['tasks'].items()))" "$WORK/ours_${model}_$max.json" "$WORK/ref_$max.json"
        check "eval --core on the $model (max $max) gives the reference's per-task accuracies: $(cat "$WORK/same_${model}_$max.out" "$WORK/same_${model}_$max.err" | tail -c 400)" test "$RC" -eq 0
      fi
    done
  done
  check "eval --core prints a line per task, then CORE" grep -qE "^CORE: -?[0-9]\.[0-9]{4}$" "$WORK/core_run_0.out"
  check "... lines with label, accuracy, centered, items" grep -qE "^lm_words +accuracy [0-9.]+ +centered [-+][0-9.]+ +items 14$" "$WORK/core_run_0.out"

  # Bits per byte: the Python sums of per-token nats and token bytes over eval --val's batches.
  run_cmd ref_bpb "$PY" "$REF" bpb "$WORK/hf" "$WORK/bundle/text.txt" 2 16 5
  if expect_ok val_bpb eval --checkpoint "$WORK/run" --val "$WORK/bundle/text.txt" --val-fraction 1 --batch-size 2 \
       --seq-len 16 --eval-steps 5 "${CPU[@]}"; then
    ours=$(sed -n 's/^val loss: [0-9.]* | bpb: \([0-9.]*\) .*/\1/p' "$WORK/val_bpb.out")
    theirs=$(awk '{print $2}' "$WORK/ref_bpb.out")
    check "eval --val's bpb ($ours) == Python's sums over the same batches ($theirs)" \
      awk -v a="$ours" -v b="$theirs" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(a > 0 && d < 2e-4)}'
  fi
fi

# --- N ranks print what one prints -----------------------------------------------------------------------
if [[ ${#MPIRUN[@]} -eq 0 ]]; then
  skip "2 and 3 ranks (no mpirun)"
elif [[ -d $WORK/run ]]; then
  for np in 2 3; do
    run_np "$np" "core_np$np" eval --checkpoint "$WORK/run" --core "$WORK/bundle" --core-max-per-task 7 --quiet "${CPU[@]}"
    run_np 1 "core_np1_$np" eval --checkpoint "$WORK/run" --core "$WORK/bundle" --core-max-per-task 7 --quiet "${CPU[@]}"
    check "CORE on $np ranks == 1 rank: $(grep '^CORE:' "$WORK/core_np$np.out")" \
      cmp -s <(grep -E "accuracy|^CORE" "$WORK/core_np$np.out") <(grep -E "accuracy|^CORE" "$WORK/core_np1_$np.out")
    run_np "$np" "val_np$np" eval --checkpoint "$WORK/run" --val "$WORK/bundle/text.txt" --val-fraction 1 --batch-size 2 \
      --seq-len 16 --eval-steps 7 --quiet "${CPU[@]}"
    run_np 1 "val_np1_$np" eval --checkpoint "$WORK/run" --val "$WORK/bundle/text.txt" --val-fraction 1 --batch-size 2 \
      --seq-len 16 --eval-steps 7 --quiet "${CPU[@]}"
    check "val loss and bpb on $np ranks == 1 rank: $(grep '^val loss' "$WORK/val_np$np.out")" \
      cmp -s <(grep "^val loss" "$WORK/val_np$np.out") <(grep "^val loss" "$WORK/val_np1_$np.out")
    check "... printed once ($(grep -c '^val loss' "$WORK/val_np$np.out") line)" test "$(grep -c '^val loss' "$WORK/val_np$np.out")" -eq 1
  done
fi

# --- train --zero 3 scores HellaSwag and CORE as --zero 0 does -------------------------------------------
# 7 HellaSwag examples and up to 7 items per CORE task: neither 2 nor 3 ranks divide them, so a rank runs out
# of items while the others still score theirs (and, under --zero 3, wait for its gathers). At step 0 both
# runs hold the same initial weights: the same counts and the same centered accuracies, to the last digit.
if [[ ${#MPIRUN[@]} -eq 0 ]]; then
  skip "train --zero 3 with --hellaswag and --core (no mpirun)"
else
  for i in 1 2 3 4 5 6 7; do
    printf '{"ctx": "The sorted list %d begins", "endings": ["with the smallest one", "at the end of it all", "when the %d ones meet", "in the middle"], "label": %d}\n' \
      "$i" "$i" $((i % 4))
  done >"$WORK/hellaswag.jsonl"
  for np in 2 3; do
    for zero in 0 3; do
      run_np "$np" "zero${zero}_np$np" "${TRAIN[@]}" --steps 1 --eval-every 0 --sample-every 0 --zero "$zero" \
        --core "$WORK/bundle" --core-every 1 --core-max-per-task 7 --hellaswag "$WORK/hellaswag.jsonl" \
        --hellaswag-every 1 --out "$WORK/zero${zero}_np$np"
      check "train --zero $zero on $np ranks with --hellaswag and --core$( [[ $RC -ne 0 ]] && echo ": exit $RC: $(tail -c 300 "$WORK/zero${zero}_np$np.err")")" \
        test "$RC" -eq 0
    done
    check "--zero 3 == --zero 0 on $np ranks, step 0: $(grep -E '^step 0 \| hellaswag' "$WORK/zero3_np$np.out")" \
      "$PY" -c "
import json, sys
def step0(d):
    rows = [json.loads(l) for l in open(d + '/metrics.jsonl')]
    return [{k: v for k, v in r.items() if k not in ('time', 'elapsed_s')} for r in rows
            if r.get('step') == 0 and ('core' in r or 'hellaswag_acc' in r)]
a, b = step0(sys.argv[1]), step0(sys.argv[2])
assert len(a) == 2 and a == b, (a, b)" "$WORK/zero3_np$np" "$WORK/zero0_np$np"
  done
fi
finish
