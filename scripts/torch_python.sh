# shellcheck shell=bash
# "The Python that has torch", found one way by the benchmarks, the GPU check and its kit:
#   1. PYTHON, when set (then it alone: a Python asked for by name is not silently replaced)
#   2. the repository's .venv (scripts/setup.sh makes it)
#   3. the Python that CMake was configured with (MYGPT_TORCH_PYTHON in build/CMakeCache.txt: beside the
#      LibTorch of the build, so the node's own torch after `setup.sh --offline`)
#   4. python3 on the PATH
# The first that can import torch wins. Sourced:  source scripts/torch_python.sh; py=$(torch_python REPO)

# torch_python [REPO]: prints the path of that Python; else prints one line naming every Python tried
# to stderr and returns 1. Looks torch up without importing it (an import takes seconds).
torch_python() {
  local repo=${1:-.} py found cached
  local -a candidates=() tried=()
  if [[ -n ${PYTHON:-} ]]; then
    candidates=("$PYTHON")
  else
    candidates=("$repo/.venv/bin/python")
    cached=$(sed -n 's/^MYGPT_TORCH_PYTHON:[A-Z]*=//p' "$repo/build/CMakeCache.txt" 2>/dev/null | head -n 1)
    [[ -n $cached && $cached != *NOTFOUND ]] && candidates+=("$cached")
    candidates+=(python3)
  fi
  for py in "${candidates[@]}"; do
    found=$(command -v "$py" 2>/dev/null) &&
      "$found" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null &&
      { echo "$found"; return 0; }
    tried+=("$py")
  done
  local hint="set PYTHON to a Python that can import torch"
  [[ -n ${PYTHON:-} ]] && hint="PYTHON names a Python without torch (unset it to search)"
  echo "no Python with torch: tried ${tried[*]}; $hint" >&2
  return 1
}
