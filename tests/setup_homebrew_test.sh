#!/usr/bin/env bash
# scripts/setup.sh's macOS route, on Linux: a fake `uname` says Darwin and a fake `brew` records what it
# is asked (its formulae "installed" as listed in a file). setup.sh --deps-only installs exactly the
# missing formulae, nothing when all are there, refuses a Mac without Homebrew in one line, and picks
# Homebrew's python@3.12, never a python older than 3.10 (a stock Mac's python3 is 3.9).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
make_work_dir setup_homebrew
fake="$WORK/bin"
prefix="$WORK/homebrew"
mkdir -p "$fake" "$prefix/opt/python@3.12/bin"
real_python=$(python3 -c "import os, sys; print(os.path.realpath(sys.executable))")
ln -s "$real_python" "$prefix/opt/python@3.12/bin/python3.12"  # this machine's python3 (>= 3.10) plays it

printf '#!/bin/sh\n[ "$1" = -s ] && { echo Darwin; exit 0; }\necho Darwin\n' >"$fake/uname"
cat >"$fake/brew" <<BREW
#!/bin/sh
echo "brew \$*" >>"$WORK/brew.log"
case "\$1" in
  list) grep -qx "\$3" "$WORK/installed" ;;
  install) shift; for f in "\$@"; do echo "\$f" >>"$WORK/installed"; done ;;
  --prefix) if [ -n "\${2:-}" ]; then echo "$prefix/opt/\$2"; else echo "$prefix"; fi ;;
  *) exit 1 ;;
esac
BREW
chmod +x "$fake/uname" "$fake/brew"
setup() { run_cmd "$1" env PATH="$fake:$PATH" PYTHON="${2:-}" bash "$REPO_DIR/scripts/setup.sh" --deps-only; }

# 1. A Mac with only cmake and boost: the rest, in one brew install.
printf 'cmake\nboost\n' >"$WORK/installed"
setup some_missing
check "missing formulae: exit 0 ($(tail -n 1 "$WORK/some_missing.err"))" test "$RC" -eq 0
check "... one 'brew install' of exactly the missing formulae" \
  test "$(grep '^brew install' "$WORK/brew.log")" = "brew install pkgconf open-mpi googletest pcre2 utf8proc nlohmann-json yaml-cpp python@3.12"
check "... and Homebrew's python@3.12 chosen for the venv" \
  grep -q "python for the venv: $prefix/opt/python@3.12/bin/python3.12" "$WORK/some_missing.out"

# 2. Everything there: no install at all.
: >"$WORK/brew.log"
setup all_there
check "all formulae there: exit 0, no brew install" \
  test "$RC" -eq 0 -a -z "$(grep '^brew install' "$WORK/brew.log")"
check "... every formula asked about" test "$(grep -c '^brew list --versions' "$WORK/brew.log")" -eq 10

# 3. A python too old (a stock Mac's 3.9): one line naming it, exit 1.
printf '#!/bin/sh\nexit 1  # answers "no" to "are you 3.10 or newer?", as 3.9 does\n' >"$fake/python3.9"
chmod +x "$fake/python3.9"
setup old_python "$fake/python3.9"
check "PYTHON=python3.9 refused: exit 1 with one line naming it ($(cat "$WORK/old_python.err"))" \
  test "$RC" -eq 1 -a "$(wc -l <"$WORK/old_python.err")" -eq 1 -a -n "$(grep 'python3.9 is not a Python 3.10 or newer' "$WORK/old_python.err")"

# 4. No Homebrew: one line saying what is needed.
rm "$fake/brew"
run_cmd no_brew env PATH="$fake:/usr/bin:/bin" bash "$REPO_DIR/scripts/setup.sh" --deps-only
check "no brew on a Mac: exit 1 with one line naming Homebrew ($(cat "$WORK/no_brew.err"))" \
  test "$RC" -eq 1 -a "$(wc -l <"$WORK/no_brew.err")" -eq 1 -a -n "$(grep 'macOS needs Homebrew' "$WORK/no_brew.err")"
finish
