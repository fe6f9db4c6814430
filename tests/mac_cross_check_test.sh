#!/usr/bin/env bash
# scripts/mac_cross_check.sh catches what breaks a Mac build: a planted use of Linux's stat::st_mtim (the
# very defect that once broke it) fails with the file and the member named; the files that read file
# times through common/file_time.h compile for macOS. Skipped (77) where the toolchain cannot be downloaded.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
make_work_dir mac_check
check_script="$REPO_DIR/scripts/mac_cross_check.sh"

cat >"$WORK/planted_mtime.cpp" <<'CPP'
#include <sys/stat.h>
// What common/folder_claim.cpp once did: Linux's name for the modification time.
long planted_mtime(const struct stat& info) { return info.st_mtim.tv_sec; }
CPP
run_cmd planted "$check_script" "$WORK/planted_mtime.cpp"
if [[ $RC -eq 77 ]]; then
  cat "$WORK/planted.out"
  exit 77
fi
check "a planted st_mtim fails the check (exit $RC)" test "$RC" -eq 1
check "... naming the file and the member" \
  grep -qE "FAILED: .*planted_mtime.cpp" "$WORK/planted.out"
check "... with the compiler's error about st_mtim" grep -q "no member named 'st_mtim'" "$WORK/planted.out"

run_cmd portable "$check_script" "$REPO_DIR/common/folder_claim.cpp" "$REPO_DIR/distributed/store_rendezvous.cpp"
check "folder_claim.cpp and store_rendezvous.cpp compile for macOS (exit $RC: $(grep -m1 error "$WORK/portable.out"))" \
  test "$RC" -eq 0
check "... both were compiled" grep -q "2 translation units, 0 failed" "$WORK/portable.out"
finish
