# shellcheck shell=bash
# What the benchmark scripts (scripts/bench_*.sh) share: finding the repository, the built binary and
# the Python that has torch (scripts/torch_python.sh), their options, a scratch directory, the facts about the machine a result depends on, the
# order of the runs, and appending a result to docs/benchmarks-log.md. Sourced first thing:
#   source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"
#   bench_options NAME=DEFAULT... -- "$@"
# Every script's header comment (from line 2 to the first line that is not a comment) is its --help.

bench_name="$(basename "$0")"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/torch_python.sh
source "$repo/scripts/torch_python.sh"
# Found now, needed later (bench_need_built): --help works without it.
python=$(torch_python "$repo" 2>/dev/null) || python=""
torchrun="${python:+$(dirname "$python")/torchrun}"
# The binary measured: MYGPT_BIN (scripts/gpu_check.sh sets it to a kit's) or this checkout's build.
mygpt_bin="${MYGPT_BIN:-$repo/build/mygpt-ddp}"
append=1

bench_die() { echo "$bench_name: $*" >&2; exit 1; }
bench_usage_error() { echo "$bench_name: $*" >&2; exit 2; }

# bench_options NAME=DEFAULT... -- ARGS...: declares the script's options and reads them. Each
# NAME=DEFAULT sets the variable NAME (dashes read as underscores) to DEFAULT, and `--NAME VALUE` in
# ARGS to VALUE; --no-append keeps the result out of docs/benchmarks-log.md; --help prints the header.
# Sets command_line, the command as run.
bench_options() {
  local -a names=()
  local spec name known
  while [[ $1 != -- ]]; do
    spec=$1
    name=${spec%%=*}
    names+=("$name")
    printf -v "${name//-/_}" '%s' "${spec#*=}"
    shift
  done
  shift
  command_line="scripts/$bench_name"
  (( $# )) && command_line+="$(printf ' %q' "$@")"
  # As a reader would type it in the checkout: no path of the machine it ran on (tests/docs_check.py (c)).
  command_line=${command_line//"$repo/"/}
  while (( $# )); do
    case "$1" in
      --no-append) append=0; shift; continue ;;
      -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    esac
    known=0
    for name in "${names[@]}"; do [[ $1 == "--$name" ]] && known=1; done
    (( known )) || bench_usage_error "unknown option '$1' (see --help)"
    (( $# >= 2 )) || bench_usage_error "$1 needs a value"
    name="${1#--}"
    printf -v "${name//-/_}" '%s' "$2"
    shift 2
  done
}

# bench_need_built PATH...: each must be an executable of the build or beside the Python with torch
# (an empty PATH is that Python, not found: the line says what was tried).
bench_need_built() {
  local path
  for path in "$@"; do
    [[ -n $path ]] || bench_die "$(torch_python "$repo" 2>&1 >/dev/null)"
    [[ -x $path ]] || bench_die "$path is missing; run scripts/setup.sh first"
  done
}

# bench_need_vocab DIR: the GPT-2 vocabulary files must be there.
bench_need_vocab() {
  [[ -f $1/encoder.json && -f $1/vocab.bpe ]] || bench_die "$1 must hold encoder.json and vocab.bpe"
}

# bench_need_transformers PYTHON: the Python side of a comparison with transformers must have it.
bench_need_transformers() {
  "$1" -c 'import transformers' 2>/dev/null ||
    bench_die "transformers is not installed for $1: $1 -m pip install transformers safetensors"
}

# bench_abs_path FILE: FILE (which must exist) as an absolute path.
bench_abs_path() {
  [[ -e $1 ]] || bench_die "$1 is missing"
  echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
}

# bench_work_dir: a fresh scratch directory as work, removed when the script exits.
bench_work_dir() {
  work="$(mktemp -d "${TMPDIR:-/tmp}/${bench_name%.sh}.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
}

# bench_private_copy BINARY: copies BINARY into $work and prints the copy's path, so that a rebuild
# while the benchmark runs cannot change (or remove) what is measured. Its library path is absolute.
bench_private_copy() {
  cp "$1" "$work/$(basename "$1")"
  echo "$work/$(basename "$1")"
}

# bench_machine_facts: cpus, cpu_model, mem, load (at start), torch_version, mpi_version (when there
# is an mpirun), printed in one line with EXTRA (optional) appended; warns when the machine is busy.
bench_machine_facts() {
  # GNU nproc honours OMP_NUM_THREADS: count the CPUs without it.
  cpus="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
  cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
  mpi_version=""
  command -v mpirun >/dev/null && mpi_version="$(mpirun --version 2>&1 | head -n 1)"
  # The vector extensions that decide which kernels LibTorch and inductor pick (a figure holds on its kind).
  cpu_vector="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
    grep -xE 'avx2|fma|avx512f|avx512_vnni|avx512_bf16|avx512_fp16|amx_bf16|amx_tile' | paste -sd, -)"
  echo "torch $torch_version${mpi_version:+ | $mpi_version} | $cpus CPUs ($cpu_model; ${cpu_vector:-no AVX2}) | $mem | load average at start: $load${1:+ | $1}"
  if awk -v n="$cpus" '{ exit !($1 > n) }' /proc/loadavg; then
    echo "$bench_name: warning: the load average exceeds the CPU count; wall-clock times will be slow and noisy" >&2
  fi
}

# bench_rotate REP ITEM...: the ITEMs rotated by REP - 1 places, so that over the repetitions no side
# always runs first (or last) on a machine whose speed drifts.
bench_rotate() {
  local rep=$1
  shift
  local k=$(( (rep - 1) % $# ))
  local -a items=("$@")
  echo "${items[@]:k}" "${items[@]:0:k}"
}

# bench_family_folder BINARY PRESET SHARDS SEQ_LEN OUT [MODEL_FLAG...]: our model of PRESET (a family
# member: nanochat-dN, llama-small, ...) with our initialization, trained one step on SHARDS, written to
# OUT with `mygpt-ddp export` (a Hugging Face folder transformers loads). Logs go to $work.
bench_family_folder() {
  local binary=$1 preset=$2 shards=$3 seq_len=$4 out=$5
  shift 5
  echo "== our $preset $*: one step, exported to a Hugging Face folder"
  bench_run "$work/init.log" "initial $preset" "$binary" train "$shards" --preset "$preset" "$@" --device cpu \
    --steps 1 --batch-size 1 --seq-len "$seq_len" --total-batch-tokens 0 --eval-every 0 --warmup-steps 0 \
    --out "$work/init-checkpoint"
  bench_run "$work/export.log" "export of $preset" "$binary" export --checkpoint "$work/init-checkpoint" --out "$out"
  rm -rf "${work:?}/init-checkpoint"
}

# bench_run LOG WHAT COMMAND...: runs COMMAND with its output in LOG; on failure shows LOG and stops.
bench_run() {
  local log=$1 what=$2
  shift 2
  "$@" >"$log" 2>&1 || { cat "$log" >&2; bench_die "the $what run failed"; }
}

# bench_report TITLE TABLE BULLET...: prints TABLE and, unless --no-append, appends a section to
# docs/benchmarks-log.md: "## TITLE, <UTC time>", the machine, the command, the BULLETs, then TABLE.
bench_report() {
  local title=$1 table=$2
  shift 2
  echo
  cat "$table"
  (( append )) || return 0
  local out="$repo/docs/benchmarks-log.md"
  [[ -f $out ]] || bench_die "$out is missing"
  {
    echo
    echo "## $title, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $cpus CPUs, $cpu_model (${cpu_vector:-no AVX2}), $mem RAM; load average (1/5/15 min) at start $load, at end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- command: \`$command_line\`"
    printf -- '- %s\n' "$@"
    echo
    cat "$table"
  } >>"$out"
  echo
  echo "appended to docs/benchmarks-log.md"
}
