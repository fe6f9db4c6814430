#!/usr/bin/env bash
# Sets up (idempotent) and runs every test: unit tests, multi-rank tests under mpirun, CLI tests, then
# the macOS cross-compile check (scripts/mac_cross_check.sh: every translation unit compiled for arm64
# macOS against the macOS torch wheel's headers, syntax only; a few minutes, once its downloads are cached),
# then a bounded fuzzing pass over the file parsers (scripts/fuzz.sh, 6 s per target, MYGPT_FUZZ_SECONDS; it installs Debian's
# clang-14 for that where apt can, and skips with a line where no clang with libFuzzer can be had).
#
#   scripts/test.sh              everything
#   scripts/test.sh -R Bpe       a subset of the CTest tests (extra arguments go to ctest; no fuzzing)
#   scripts/test.sh --sanitize   the whole CTest suite again in build-asan/, built with AddressSanitizer
#                                and UBSan (slow; not part of CI)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

if [[ ${1:-} == --sanitize ]]; then
  shift
  "$repo/scripts/setup.sh"  # the dependencies and the venv's LibTorch
  source "$repo/scripts/mpi_env.sh"
  torch_prefix=$("$repo/.venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake -S "$repo" -B "$repo/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$torch_prefix" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  cmake --build "$repo/build-asan" -j "${MYGPT_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu)}"
  # LibTorch's own globals are not freed at exit, and its uninstrumented code trips the ODR check.
  export ASAN_OPTIONS="detect_leaks=0:detect_odr_violation=0:${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
  cd "$repo/build-asan"
  # plan_accuracy compares plan's estimate with the peak RSS of real runs, which ASan's shadow memory and
  # quarantine inflate by 20-30%: it says nothing about memory errors, so it is left to the plain suite.
  exec ctest --output-on-failure -j "${MYGPT_TEST_JOBS:-2}" -E '^plan_accuracy$' ${1+"$@"}
fi

"$repo/scripts/setup.sh"
source "$repo/scripts/mpi_env.sh"
# The public files the tests read: ../shared/data beside the checkout where it is there (the project's
# copy), else fetched (checksummed) into a cache that the tests are pointed at; offline, the tests that
# need them skip, each saying so, and the closing line counts them.
if [[ -z ${MYGPT_TEST_DATA:-} && ! -d $repo/../shared/data ]]; then
  export MYGPT_TEST_DATA=${XDG_CACHE_HOME:-${HOME:-.}/.cache}/mygpt-ddp/data
  "$repo/scripts/fetch_test_data.sh" "$MYGPT_TEST_DATA" || echo "[test] running without the files above"
fi
cd "$repo/build"
set +e
ctest --output-on-failure -j "${MYGPT_TEST_JOBS:-2}" ${1+"$@"} | tee ctest_console.txt  # (macOS's bash 3.2: "$@" of nothing is unbound)
ctest_rc=${PIPESTATUS[0]}
set -e
# How many suites and checks skipped, and why: the run's closing line, after the Mac check and fuzzing.
skip_line=$("$repo/scripts/test_skip_summary.sh" ctest_console.txt Testing/Temporary/LastTest.log)
trap 'echo "$skip_line"' EXIT
(( ctest_rc == 0 )) || exit "$ctest_rc"
(( $# == 0 )) || exit 0

# The Mac build, proven here: 77 means its toolchain could not be downloaded (it said so in one line).
# On a Mac the build above is the proof itself.
mac_rc=0
if [[ $(uname -s) == Darwin ]]; then
  echo "[mac-check] skipped: this is macOS, whose own build and tests just ran"
else
  "$repo/scripts/mac_cross_check.sh" || mac_rc=$?
fi
if (( mac_rc != 0 && mac_rc != 77 )); then
  echo "[test] the macOS cross-compile check failed (above: each file and its errors)"
  exit "$mac_rc"
fi

# Fuzzing needs clang and its libFuzzer runtime (Debian: clang-14, libclang-rt-14-dev); on macOS Apple's
# clang has no libFuzzer, and fuzz.sh skips with a line.
if ! command -v clang++-14 >/dev/null 2>&1 || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  if command -v apt-get >/dev/null 2>&1 && [[ ! -f $repo/.deps/env.sh ]]; then
    sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
    echo "[test] installing clang-14 and libclang-rt-14-dev for the fuzzers"
    { $sudo apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >/dev/null 2>&1 ||
      { $sudo apt-get update -qq >/dev/null 2>&1 &&
        $sudo apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >/dev/null 2>&1; }; } ||
      echo "[test] could not install clang-14; fuzzing will be skipped"
  fi
fi
rc=0
"$repo/scripts/fuzz.sh" --seconds "${MYGPT_FUZZ_SECONDS:-6}" || rc=$?
if (( rc == 77 )); then exit 0; fi  # no clang with libFuzzer: skipped, as it said
exit "$rc"
