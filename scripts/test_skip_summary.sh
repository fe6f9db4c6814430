#!/usr/bin/env bash
# The closing line of a test run: how many suites and checks skipped, and why. Reads CTest's console
# output (the suites CTest marked ***Skipped, or "Not Run") and Testing/Temporary/LastTest.log (every
# suite's output: the shell suites' "SKIP: reason" lines, GoogleTest's "[  SKIPPED ]" tests with the
# message before them). Skips for want of the public data (../shared/data or the download cache) are
# counted apart: they are what a machine without network access sees.
#
# usage: test_skip_summary.sh CTEST_CONSOLE_OUTPUT LAST_TEST_LOG
set -uo pipefail
console=$1
log=$2
[[ -f $log ]] || { echo "[test] no $log to count skips in"; exit 0; }

suites=$(grep -E '\*\*\*Skipped|\*\*\*Not Run' "$console" 2>/dev/null | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/' |
         tr '\n' ' ' | sed 's/ $//')
awk -v suites="$suites" '
  # A GoogleTest skip: "path:line: Skipped", its message on the following lines, then "[  SKIPPED ] A.B (N ms)".
  /: Skipped$/ { in_skip = 1; message = ""; next }
  in_skip && /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ { record(message); in_skip = 0; next }
  in_skip { if (message == "") message = $0; next }
  /^SKIP: / { record(substr($0, 7)); next }
  function record(reason) {
    if (reason == "") reason = "(no reason given)";
    total++;
    if (reason ~ /absent|shared data|shared\/data|encoder\.json|tinyshakespeare|hellaswag|HellaSwag|tokenizer files are not in/) {
      data++;
    } else {
      other++;
      key = substr(reason, 1, 70);
      if (!(key in count)) order[++n] = key;
      count[key]++;
    }
  }
  END {
    nsuites = suites == "" ? 0 : split(suites, names, " ");
    line = sprintf("[test] skipped: %d suite(s)%s, %d check(s)", nsuites, nsuites ? " (" suites ")" : "", total + 0);
    if (total) {
      line = line sprintf(": %d for want of the public data (offline, and no ../shared/data)", data + 0);
      if (other) {
        line = line sprintf(", %d for other reasons:", other);
        for (i = 1; i <= n && i <= 4; i++) line = line sprintf(" %s (x%d);", order[i], count[order[i]]);
        sub(/;$/, "", line);
        if (n > 4) line = line sprintf("; and %d more", n - 4);
      }
    }
    print line;
  }
' "$log"
