# shellcheck shell=bash
# Helpers shared by the shell test suites (tests/*.sh, tests/mpi/*.sh). Source it first thing:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"        (from tests/mpi: .../../lib.sh)
#
# A suite records each check with pass/fail/skip (or check), runs the binary with run/run_np, which
# keep stdout and stderr of every command in $WORK/NAME.out and .err, and ends with finish, which
# prints "N passed, M failed, K skipped (S s)" and exits non-zero unless every check passed.

TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$TESTS_DIR/.." && pwd)
# shellcheck source=../scripts/mpi_env.sh
source "$REPO_DIR/scripts/mpi_env.sh"  # lets Open MPI run as root
# One intra-op thread per process: ctest runs suites side by side on small machines.
export OMP_NUM_THREADS=1

# --- portable shell: the suites run on Linux and on macOS (BSD tools, no /proc) alike ------------------
# now_seconds: the wall clock in seconds with a fraction (GNU date's %N is a literal N on macOS).
now_seconds() {
  if [[ -n ${EPOCHREALTIME:-} ]]; then echo "$EPOCHREALTIME"; else perl -MTime::HiRes=time -e 'printf "%.6f\n", time'; fi
}
# file_size PATH / file_inode PATH: what GNU `stat -c %s` / `%i` print (BSD stat spells it -f %z / %i).
file_size() { wc -c <"$1" | tr -d ' '; }
file_inode() { ls -di "$1" | awk '{print $1}'; }
# with_timeout SECONDS COMMAND...: COMMAND, killed after SECONDS (exit 124, as GNU timeout); coreutils'
# timeout where there is one (Linux; Homebrew's gtimeout), else perl's alarm (macOS has perl, not timeout).
with_timeout() {
  local seconds=$1
  shift
  if command -v timeout >/dev/null 2>&1; then timeout "$seconds" "$@"
  elif command -v gtimeout >/dev/null 2>&1; then gtimeout "$seconds" "$@"
  else
    perl -e '$s = shift; $pid = fork // die; if (!$pid) { exec @ARGV or exit 127 }
             local $SIG{ALRM} = sub { kill "TERM", $pid; waitpid $pid, 0; exit 124 }; alarm $s if $s > 0;
             waitpid $pid, 0; exit($? & 127 ? 128 + ($? & 127) : $? >> 8)' "$seconds" "$@"
  fi
}
# absolute_path PATH: PATH from the root (macOS before 13 has no realpath).
absolute_path() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

# --- the public test data ---------------------------------------------------------------------------
# test_data_dir [DIR]: where the suites find Tiny Shakespeare, GPT-2's encoder.json/vocab.bpe and HellaSwag,
# in the order of tests/test_data.h: $MYGPT_TEST_DATA when set (scripts/test.sh sets it to its download
# cache where ../shared/data is absent); else DIR (CMake passes ../shared/data beside the checkout) where it
# is a folder; else the cache scripts/fetch_test_data.sh fills.
test_data_dir() {
  if [[ -n ${MYGPT_TEST_DATA:-} ]]; then echo "$MYGPT_TEST_DATA"
  elif [[ -n ${1:-} && -d ${1:-} ]]; then echo "$1"
  elif [[ -d $REPO_DIR/../shared/data ]]; then (cd "$REPO_DIR/../shared/data" && pwd)
  else echo "${XDG_CACHE_HOME:-${HOME:-.}/.cache}/mygpt-ddp/data"
  fi
}

# --- checks and the verdict -----------------------------------------------------------------------
START=$SECONDS
passed=0
failed=0
skipped=0
pass() { echo "PASS: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1${2:+ -- $2}"; failed=$((failed + 1)); }
skip() { echo "SKIP: $1"; skipped=$((skipped + 1)); }
# check LABEL COMMAND...: passes when COMMAND succeeds.
check() {
  local label=$1
  shift
  if "$@"; then pass "$label"; else fail "$label"; fi
}
# A suite that checked nothing has not passed either.
finish() {
  echo "$passed passed, $failed failed, $skipped skipped ($((SECONDS - START)) s)"
  if [[ $failed -eq 0 && $passed -gt 0 ]]; then exit 0; fi
  exit 1
}

# --- the binary, a scratch directory, mpirun ------------------------------------------------------
# use_binary PATH: the mygpt-ddp under test as BIN (absolute); an unusable one ends the suite failed.
use_binary() {
  if [[ -z ${1:-} || ! -x $1 ]]; then
    fail "binary '${1:-}' is not executable"
    finish
  fi
  BIN=$(absolute_path "$1")
}

# make_work_dir NAME: a fresh directory as WORK, removed when the suite exits unless KEEP is set.
make_work_dir() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/mygpt_$1.XXXXXX")
  trap '[[ -n ${KEEP:-} ]] || rm -rf "$WORK"' EXIT
}

# use_mpirun [LAUNCHER]: MPIRUN as the command that starts ranks (LAUNCHER, else mpirun from the PATH;
# empty when there is none). Open MPI may start more ranks than cores and leaves them unpinned.
use_mpirun() {
  local launcher=${1:-mpirun}
  MPIRUN=()
  command -v "$launcher" >/dev/null 2>&1 || return 0
  MPIRUN=("$launcher")
  # Open MPI's mpiexec calls itself "OpenRTE" in some versions.
  if "$launcher" --version 2>&1 | grep -qiE "open ?mpi|openrte"; then MPIRUN+=(--oversubscribe --bind-to none); fi
  return 0
}

# --- running commands -----------------------------------------------------------------------------
# Seconds a command may take before it is killed (and fails); 0 lets it run as long as it needs.
RUN_TIMEOUT=120
# run_cmd NAME COMMAND...: stdout in $WORK/NAME.out, stderr in $WORK/NAME.err, exit code in RC.
run_cmd() {
  local name=$1
  shift
  with_timeout "$RUN_TIMEOUT" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RC=$?
}
# run NAME ARGS...: the binary with ARGS, as run_cmd.
run() {
  local name=$1
  shift
  run_cmd "$name" "$BIN" "$@"
}
# run_np N NAME ARGS...: the binary on N ranks under $MPIRUN (a plain process for N = 1), as run_cmd;
# .out and .err hold the output of every rank.
run_np() {
  local ranks=$1 name=$2
  shift 2
  if [[ $ranks -eq 1 ]]; then run "$name" "$@"; else run_cmd "$name" "${MPIRUN[@]}" -np "$ranks" "$BIN" "$@"; fi
}

# expect_ok NAME ARGS...: run, recording a failure unless it exits 0; returns whether it did.
expect_ok() {
  local name=$1
  shift
  run "$name" "$@"
  if [[ $RC -eq 0 ]]; then return 0; fi
  fail "$name" "exit $RC: $(tail -c 300 "$WORK/$name.err")"
  return 1
}

# expect_bad NAME REGEX ARGS...: run, recording a failure unless the binary exits 2 with exactly one
# stderr line that matches the extended REGEX; returns whether it did (the caller records the pass).
expect_bad() {
  local name=$1 pattern=$2
  shift 2
  run "$name" "$@"
  local err="$WORK/$name.err" lines
  lines=$(wc -l <"$err")
  if [[ $RC -ne 2 ]]; then
    fail "$name" "exit code $RC, expected 2; stderr: $(head -c 300 "$err")"
  elif [[ $lines -ne 1 ]]; then
    fail "$name" "stderr has $lines lines, expected 1: $(head -c 300 "$err")"
  elif ! grep -qE -- "$pattern" "$err"; then
    fail "$name" "message '$(cat "$err")' does not match /$pattern/"
  else
    return 0
  fi
  return 1
}

# files_left_in DIR: the checkpoints and token shards under DIR (none when DIR does not exist).
files_left_in() { find "$1" \( -name 'ckpt_*' -o -name '*.bin' \) 2>/dev/null | tr '\n' ' '; }

# expect_bad_input NAME REGEX OUT_DIR ARGS...: expect_bad, and the failed command left no checkpoint
# or shard under OUT_DIR ("" for a command that writes none); records the pass.
expect_bad_input() {
  local name=$1 pattern=$2 out=$3
  shift 3
  expect_bad "$name" "$pattern" "$@" || return 0
  local left
  left=$([[ -n $out ]] && files_left_in "$out")
  if [[ -n $left ]]; then fail "$name" "the failed command left $left"; else pass "$name: exit 2, $(cat "$WORK/$name.err")"; fi
}

# train_plain_model NAME VOCAB OUT TRAIN_FLAGS...: a base model (no chat model) on GPT-2's tokenizer from
# VOCAB, trained into OUT on lines of plain text written to $WORK/NAME.txt (train refuses conversations
# without --sft); as run NAME (RC, $WORK/NAME.out and .err). TRAIN_FLAGS give its shape, steps,
# threads and device.
train_plain_model() {
  local name=$1 vocab=$2 out=$3 i
  shift 3
  for i in $(seq 200); do echo "Plain line $i of a base model's text, with no conversation in it, read token by token."; done \
    >"$WORK/$name.txt"
  run "$name" train "$WORK/$name.txt" --tokenizer gpt2 --vocab "$vocab" --eval-every 0 "$@" --out "$out"
}

# --- output of a run ------------------------------------------------------------------------------
# metric_values KEY FILE: the values of "KEY" in a metrics.jsonl, one per line, as written.
metric_values() { grep -o "\"$1\":[^,}]*" "$2" | cut -d: -f2; }
