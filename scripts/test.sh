#!/usr/bin/env bash
# Sets up (idempotent) and runs every test: unit tests, multi-rank tests under mpirun, CLI tests.
# Extra arguments go to ctest, e.g. scripts/test.sh -R bpe
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/scripts/setup.sh"
source "$repo/scripts/mpi_env.sh"
cd "$repo/build"
ctest --output-on-failure -j "${MYGPT_TEST_JOBS:-2}" "$@"
