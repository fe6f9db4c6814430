#!/usr/bin/env bash
# scripts/slurm/train_gpt2.sbatch under a fake Slurm: `srun` and `scontrol` are stand-ins on the PATH
# that record their arguments; srun plays a run that stops early with a checkpoint, one that finishes,
# one that fails, and one that runs until a signal (as srun does: SIGUSR1 is forwarded to the ranks,
# which stop with a checkpoint; SIGTERM makes srun SIGKILL them). Checks the #SBATCH lines (signal to
# the tasks before the time limit, requeue, a log path that needs no folder), that only an early stop
# requeues the job, that a TERM to the batch shell or to its whole process group (scancel -b, --full)
# reaches the ranks as a stop and never srun as a TERM, and, with the real binary, that the script
# prints the micro-batch the run will use (`plan` with the same flags).
# Usage: slurm_test.sh [PATH/TO/mygpt-ddp]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
make_work_dir slurm
SCRIPT="$REPO_DIR/scripts/slurm/train_gpt2.sbatch"
REAL_BINARY=${1:-}

check "the script parses (bash -n)" bash -n "$SCRIPT"
check "#SBATCH --signal=TERM@180: the tasks (no B:) get SIGTERM 3 minutes before the limit" \
  grep -qx "#SBATCH --signal=TERM@180" "$SCRIPT"
check "#SBATCH --requeue" grep -qx "#SBATCH --requeue" "$SCRIPT"
output=$(sed -n 's/^#SBATCH --output=//p' "$SCRIPT")
check "the log path ($output) names no folder that Slurm would need to exist" test "${output#*/}" = "$output"

mkdir -p "$WORK/fake"
cat >"$WORK/fake/srun" <<'SRUN'
#!/usr/bin/env bash
if [[ $* == --mpi=list ]]; then  # the plugins this fake Slurm has
  printf 'MPI plugin types are...\n\tnone\n\tcray_shasta\n%s' "${FAKE_MPI_PLUGINS:-}"
  exit 0
fi
printf '%s\n' "$*" >>"$WORK/srun.args"
out=""; prev=""
for a in "$@"; do [[ $prev == --out ]] && out=$a; [[ $prev == --steps ]] && STEPS=$a; prev=$a; done
case "$FAKE_SRUN" in
  stop) touch "$out/ckpt_00000005.safetensors"; exit 0 ;;
  finish) touch "$out/$(printf 'ckpt_%08d.safetensors' "$STEPS")"; exit 0 ;;
  finished_old_name) touch "$out/$(printf 'ckpt_%08d.pt' "$STEPS")"; exit 0 ;;
  fail) exit 1 ;;
  until_signal)  # srun's own handling: USR1 forwarded (the ranks stop and save), TERM kills the ranks
    trap 'echo USR1 >>"$WORK/srun.signals"; touch "$out/ckpt_00000005.safetensors"; exit 0' USR1
    trap 'echo TERM >>"$WORK/srun.signals"; exit 137' TERM
    mkdir -p "$out" && printf 'host=h\npid=1\njob=slurm job 42\nrestart=0\n' >"$out/run.lock"  # rank 0's claim: all ranks run
    echo $$ >"$WORK/srun.started"
    for _ in $(seq 300); do sleep 0.1; done
    exit 0 ;;
  slow_start)  # ranks that take 2 s to install their handlers: a SIGUSR1 before kills them (exit 138);
    # then rank 0 claims --out (run.lock naming the job and its start) and a stop saves
    trap 'echo EARLY_USR1 >>"$WORK/srun.signals"; exit 138' USR1
    echo $$ >"$WORK/srun.started"
    sleep 2
    mkdir -p "$out" && printf 'host=h\npid=1\njob=slurm job 42\nrestart=0\n' >"$out/run.lock"
    trap 'echo USR1 >>"$WORK/srun.signals"; touch "$out/ckpt_00000005.safetensors"; rm -f "$out/run.lock"; exit 0' USR1
    for _ in $(seq 300); do sleep 0.1; done
    exit 0 ;;
esac
SRUN
# scontrol: records its arguments; `show job` tells the job's state (FAKE_JOB_STATE, default RUNNING).
cat >"$WORK/fake/scontrol" <<'SCONTROL'
#!/usr/bin/env bash
printf "%s\n" "$*" >>"$WORK/scontrol.args"
if [[ $1 == show && $2 == job ]]; then
  printf 'JobId=%s JobName=gpt2-124m\n   UserId=u(1) GroupId=g(1)\n   JobState=%s Reason=None Dependency=(null)\n' \
    "$3" "${FAKE_JOB_STATE:-RUNNING}"
fi
SCONTROL
# The binary: `plan` takes FAKE_PLAN_SECONDS (a stop may come meanwhile); everything else succeeds at once.
cat >"$WORK/fake/mygpt-ddp" <<'BINARY'
#!/usr/bin/env bash
if [[ $1 == plan && -n ${FAKE_PLAN_SECONDS:-} ]]; then
  echo $$ >"$WORK/plan.started"
  sleep "$FAKE_PLAN_SECONDS"
fi
exit 0
BINARY
chmod +x "$WORK/fake/srun" "$WORK/fake/scontrol" "$WORK/fake/mygpt-ddp"

# job MODE [NODES [ENV...]]: the batch script as Slurm would run it on NODES nodes of 8 GPUs (default
# 1 node of 2), srun playing MODE; exit status in RC.
job() {
  local mode=$1 nodes=${2:-} per_node=8
  [[ -n $nodes ]] || { nodes=1; per_node=2; }
  shift $(( $# > 1 ? 2 : 1 ))
  rm -rf "$WORK/out" "$WORK/srun.args" "$WORK/scontrol.args"
  env WORK="$WORK" FAKE_SRUN="$mode" FAKE_MPI_PLUGINS=$'\tpmi2\n\tpmix\n' PATH="$WORK/fake:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=$nodes \
    SLURM_NTASKS_PER_NODE=$per_node SLURM_NTASKS=$((nodes * per_node)) SLURM_JOB_NODELIST=node1 SLURM_CPUS_PER_TASK=1 \
    REPO="$REPO_DIR" DATA_DIR="$WORK/data" OUT_DIR="$WORK/out" BINARY="$WORK/fake/mygpt-ddp" STEPS=10 "$@" \
    bash "$SCRIPT" "${JOB_ARGS[@]}" >"$WORK/job_$mode.out" 2>&1
  RC=$?
}
JOB_ARGS=()  # training flags after the script's name (sbatch passes them on)
# The value of FLAG in the recorded srun command line.
srun_flag() { sed -n "s/.* $1 \([^ ]*\).*/\1/p" "$WORK/srun.args"; }

job stop
check "an early stop with a checkpoint exits 0 (exit $RC)" test "$RC" -eq 0
check "... and requeues the job (scontrol requeue 42)" grep -qx "requeue 42" "$WORK/scontrol.args"
# A cancel (scancel JOBID) TERMs the ranks too, and they save (issue 64: the job was requeued and started
# again): the job's state in scontrol tells a cancel from a stop before the time limit or by hand.
for state in CANCELLED COMPLETING; do
  job stop 1 FAKE_JOB_STATE=$state
  check "a cancelled job (JobState=$state) that stopped with a checkpoint exits 0 (exit $RC)" test "$RC" -eq 0
  check "... and is not requeued: $(grep -m1 'cancelled' "$WORK/job_stop.out")" \
    bash -c "! grep -q '^requeue' '$WORK/scontrol.args' && grep -q 'was cancelled (JobState=$state): not requeued' '$WORK/job_stop.out'"
done
job stop 1 FAKE_JOB_STATE=RUNNING
check "a running job that stopped early (the time limit's TERM, a stop by hand) is requeued" grep -qx "requeue 42" "$WORK/scontrol.args"
check "srun runs the binary with --mpi=pmix and --resume auto" grep -q -- "--mpi=pmix .*--resume auto" "$WORK/srun.args"
job finish 1 FAKE_MPI_PLUGINS=$'\tpmi2\n'
check "a Slurm with PMI2 only: --mpi=pmi2" grep -q -- "--mpi=pmi2 " "$WORK/srun.args"
job finish 1 MYGPT_SRUN_MPI=pmi3
check "MYGPT_SRUN_MPI=pmi3 is refused (exit $RC)" test "$RC" -eq 2
for nodes in 1 2 4 8; do  # Debian's slurm-wlm: no MPI plugin; the ranks meet through the c10d store
  job finish "$nodes" FAKE_MPI_PLUGINS=
  if [[ $RC -eq 0 ]] && grep -q -- "--mpi=none .*--resume auto" "$WORK/srun.args" &&
     grep -q "ranks meet through a c10d store" "$WORK/job_finish.out"; then
    pass "$nodes node(s), a Slurm without PMIx: srun --mpi=none, the store rendezvous announced"
  else
    fail "$nodes node(s), a Slurm without PMIx" "exit $RC: $(cat "$WORK/srun.args" "$WORK/job_finish.out" 2>/dev/null | tail -n 3)"
  fi
done
job finish
check "a finished run exits 0 (exit $RC)" test "$RC" -eq 0
check "... and is not requeued" test ! -e "$WORK/scontrol.args"
# Resumed at its last step, a run of an older build's (ckpt_<STEPS>.pt) writes nothing new: done.
job finished_old_name
check "a run finished under the old checkpoint name exits 0 (exit $RC)" test "$RC" -eq 0
check "... and is not requeued" test ! -e "$WORK/scontrol.args"
job fail
check "a failed run keeps its exit status (exit $RC)" test "$RC" -eq 1
check "... and is not requeued" test ! -e "$WORK/scontrol.args"
# The documented node counts: the micro-batch follows the ranks, so the total batch always divides.
for nodes in 1 2 4 8; do
  job finish "$nodes"
  micro=$(srun_flag --batch-size)
  total=$(srun_flag --total-batch-tokens)
  ranks=$((nodes * 8))
  if [[ $RC -ne 0 || -z $micro ]]; then
    fail "$nodes node(s) x 8 GPUs: the job ran" "exit $RC: $(tail -n 2 "$WORK/job_finish.out")"
  elif (( total % (micro * 1024 * ranks) != 0 || micro > 32 )); then
    fail "$nodes node(s) x 8 GPUs" "micro-batch $micro x 1024 x $ranks ranks does not divide $total (or exceeds 32)"
  else
    pass "$nodes node(s) x 8 GPUs: micro-batch $micro, accumulation $((total / (micro * 1024 * ranks))) for $total tokens per step"
  fi
done
job finish 3
check "3 nodes (24 ranks do not divide 524288 tokens into rows) is refused before srun (exit $RC)" test "$RC" -eq 2
check "... naming TOTAL_BATCH_TOKENS" grep -q "TOTAL_BATCH_TOKENS 524288" "$WORK/job_finish.out"
job finish 2 MICRO_BATCH=8
check "MICRO_BATCH given wins (--batch-size $(srun_flag --batch-size))" test "$(srun_flag --batch-size)" = 8
job finish 1 DATA_DIR=/path/to/edu_fineweb10B
check "the placeholder DATA_DIR is refused with a line naming it (exit $RC)" \
  grep -q "set DATA_DIR" "$WORK/job_finish.out"
job finish 1 HELLASWAG=/x/hellaswag_val.jsonl
check "HELLASWAG without VOCAB_DIR is refused (exit $RC)" grep -q "HELLASWAG needs VOCAB_DIR" "$WORK/job_finish.out"
job finish 1 HELLASWAG=/x/h.jsonl VOCAB_DIR=/x/gpt2
check "VOCAB_DIR and HELLASWAG reach the binary" grep -q -- "--vocab /x/gpt2 --hellaswag /x/h.jsonl" "$WORK/srun.args"
# A trial run (issue 40: --warmup-steps 715 was fixed, so no run under 716 steps could start): training
# flags after the script's name replace the recipe's, each flag given once; TRAIN_FLAGS does the same.
job finish 1
check "the recipe leaves --warmup-steps to the preset (a short run shortens it)" bash -c "! grep -q -- '--warmup-steps' '$WORK/srun.args'"
JOB_ARGS=(--steps 200 --warmup-steps 20 --eval-every 50)
job finish 1
JOB_ARGS=()
check "trailing flags reach the binary (exit $RC: $(cat "$WORK/srun.args"))" \
  grep -q -- "--steps 200 --warmup-steps 20 --eval-every 50" "$WORK/srun.args"
check "... each once: the recipe's --steps and --eval-every are left out" \
  test "$(grep -o -- '--steps ' "$WORK/srun.args" | wc -l)" -eq 1 -a "$(grep -o -- '--eval-every ' "$WORK/srun.args" | wc -l)" -eq 1
check "... and the run's own --steps 200 tells that it finished (not requeued)" test "$RC" -eq 0 -a ! -e "$WORK/scontrol.args"
job finish 1 TRAIN_FLAGS="--steps 30 --log-every 1"
check "TRAIN_FLAGS reach the binary, each flag once" \
  test "$(grep -o -- '--steps 30' "$WORK/srun.args" | wc -l)" -eq 1 -a "$(grep -o -- '--log-every ' "$WORK/srun.args" | wc -l)" -eq 1
check "no path of this repository's own layout is a default" bash -c "! grep -n 'shared/dat[a]' '$SCRIPT'"

# --- a stop by hand (issue 59): scancel --signal=TERM with --full or -b signals the batch shell (with
# --full its whole process group); srun, given a TERM, SIGKILLs the ranks (no checkpoint). The shell must
# pass the stop on as SIGUSR1, and srun must not be in its process group.
# signalled_job HOW SIGNAL: the script (in a process group of its own, as slurmstepd starts it; SIGINT not
# ignored, as a background job of this shell would have it) with srun running until a signal; HOW: shell
# (kill the shell: scancel -b) or group (killpg: scancel --full).
# SIGNALLED_AT: the file whose appearance says it is time for the signal (srun started); SIGNALLED_ENV: more
# variables (FAKE_SRUN=until_signal unless it says otherwise).
SIGNALLED_AT=srun.started
SIGNALLED_ENV=()
signalled_job() {
  local how=$1 sig=$2
  rm -rf "$WORK/out" "$WORK/srun.args" "$WORK/scontrol.args" "$WORK/srun.signals" "$WORK/srun.started" "$WORK/plan.started"
  env WORK="$WORK" FAKE_SRUN=until_signal FAKE_MPI_PLUGINS= PATH="$WORK/fake:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=1 \
    SLURM_NTASKS_PER_NODE=2 SLURM_NTASKS=2 SLURM_JOB_NODELIST=node1 SLURM_CPUS_PER_TASK=1 \
    REPO="$REPO_DIR" DATA_DIR="$WORK/data" OUT_DIR="$WORK/out" BINARY="$WORK/fake/mygpt-ddp" STEPS=10 "${SIGNALLED_ENV[@]}" \
    setsid perl -e '$SIG{INT} = "DEFAULT"; exec @ARGV or die' bash "$SCRIPT" >"$WORK/job_signal.out" 2>&1 &
  local shell=$!
  for _ in $(seq 100); do [[ -s $WORK/$SIGNALLED_AT ]] && break; sleep 0.1; done
  if [[ $how == group ]]; then kill "-$sig" -- "-$shell"; else kill "-$sig" "$shell"; fi
  wait "$shell"
  RC=$?
}
SIGNAL_FORMS=("shell TERM|scancel --signal=TERM -b (the batch shell alone)"
              "group TERM|scancel --signal=TERM --full (the shell's whole process group)"
              "group USR1|scancel --signal=USR1 --full" "shell INT|SIGINT to the batch shell")
command -v setsid >/dev/null || { skip "a stop by hand (no setsid here: Slurm runs on Linux)"; SIGNAL_FORMS=(); }
for form in "${SIGNAL_FORMS[@]}"; do
  read -r how sig <<<"${form%%|*}"
  signalled_job "$how" "$sig"
  signals=$(tr '\n' ' ' 2>/dev/null <"$WORK/srun.signals")
  if [[ $RC -eq 0 && $signals == "USR1 " ]] && grep -qx "requeue 42" "$WORK/scontrol.args" 2>/dev/null; then
    pass "${form#*|}: srun got SIGUSR1 alone (the ranks stop with a checkpoint), the job requeued"
  else
    fail "${form#*|}" "exit $RC, srun got: '${signals:-nothing}'; $(tail -n 3 "$WORK/job_signal.out" | tr '\n' ' ')"
  fi
done
[[ ${#SIGNAL_FORMS[@]} -eq 0 ]] || check "... the batch shell says what it did" grep -q "the batch shell got SIGINT: asking the ranks to stop" "$WORK/job_signal.out"

# --- a stop during start-up (issue 64: exit 143 or 138, FAILED 0:15, no requeue) -------------------------
if [[ ${#SIGNAL_FORMS[@]} -gt 0 ]]; then
  # While `plan` runs: the shell holds the stop (plan, in a session of its own, is not reached by a TERM to
  # the shell's group), starts no rank and requeues the job.
  SIGNALLED_AT=plan.started SIGNALLED_ENV=(FAKE_PLAN_SECONDS=2)
  for how in shell group; do
    signalled_job "$how" TERM
    if [[ $RC -eq 0 && ! -e $WORK/srun.args ]] && grep -qx "requeue 42" "$WORK/scontrol.args" 2>/dev/null &&
       grep -q "a stop was asked before the ranks started: not starting them" "$WORK/job_signal.out"; then
      pass "a TERM to the batch shell ($how) during plan: no rank started, exit 0, the job requeued"
    else
      fail "a TERM to the batch shell ($how) during plan" "exit $RC; $(tail -n 3 "$WORK/job_signal.out" | tr '\n' ' ')"
    fi
  done
  # While the ranks start: the stop waits for their claim on --out (every rank has its handlers by then).
  SIGNALLED_AT=srun.started SIGNALLED_ENV=(FAKE_SRUN=slow_start)
  signalled_job group TERM
  signals=$(tr '\n' ' ' 2>/dev/null <"$WORK/srun.signals")
  if [[ $RC -eq 0 && $signals == "USR1 " ]] && grep -qx "requeue 42" "$WORK/scontrol.args" 2>/dev/null; then
    pass "a TERM while the ranks start: SIGUSR1 held until they claimed --out, then a checkpoint and a requeue"
  else
    fail "a TERM while the ranks start" "exit $RC, srun got: '${signals:-nothing}'; $(tail -n 3 "$WORK/job_signal.out" | tr '\n' ' ')"
  fi
  # A cancel: the group's TERM, the ranks save, the job CANCELLED: it ends.
  SIGNALLED_ENV=(FAKE_JOB_STATE=CANCELLED)
  signalled_job group TERM
  if [[ $RC -eq 0 ]] && ! grep -q '^requeue' "$WORK/scontrol.args" 2>/dev/null &&
     grep -q "was cancelled (JobState=CANCELLED): not requeued" "$WORK/job_signal.out"; then
    pass "scancel JOBID (the group's TERM, the job CANCELLED): the ranks save, the job is not requeued"
  else
    fail "scancel JOBID" "exit $RC; $(tail -n 3 "$WORK/job_signal.out" | tr '\n' ' ')"
  fi
  SIGNALLED_ENV=()
fi
check "the header says which scancel forms save" \
  bash -c "grep -q '^#   scancel --signal=TERM --full JOBID  saves' '$SCRIPT' && grep -q '^#   scancel JOBID (no --signal)  *ends the job' '$SCRIPT'"

# --- what the run will use (issue 59): the script printed its own arithmetic ("micro-batch: 32 rows x
# 1024 tokens"), wrong once flags after the script's name override --batch-size or --seq-len.
JOB_ARGS=(--seq-len 2048)
job finish 2
JOB_ARGS=()
check "--seq-len 2048 on 16 ranks: the recipe's micro-batch follows it (--batch-size $(srun_flag --batch-size), 16 x 2048 x 16 = 524288)" \
  test "$(srun_flag --batch-size)" = 16
if [[ -x $REAL_BINARY ]]; then
  for i in $(seq 1 300); do echo "To be, or not to be: line $i of a small play."; done >"$WORK/text.txt"
  JOB_ARGS=(--batch-size 4 --seq-len 64 --total-batch-tokens 2048)
  job finish 1 BINARY="$REAL_BINARY" DATA_DIR="$WORK/text.txt"
  JOB_ARGS=()
  line=$(grep '^per step and rank:' "$WORK/job_finish.out")
  check "the run's micro-batch on 8 ranks, as plan reads the same flags: '$line'" \
    bash -c "[[ '$line' == 'per step and rank: 4 x 64 tokens x 1 accumulation = 256 tokens'*'; 2048 tokens per step over all ranks' ]]"
  check "... and no micro-batch of the script's own arithmetic" bash -c "! grep -q '^micro-batch:' '$WORK/job_finish.out'"
  JOB_ARGS=(--lr abc)
  job finish 1 BINARY="$REAL_BINARY" DATA_DIR="$WORK/text.txt"
  JOB_ARGS=()
  check "a flag the run would refuse is refused before srun (exit $RC: $(grep -m1 error "$WORK/job_finish.out"))" \
    test "$RC" -eq 2 -a ! -e "$WORK/srun.args"
else
  skip "the micro-batch from plan (give the binary: slurm_test.sh PATH/TO/mygpt-ddp)"
fi
finish
