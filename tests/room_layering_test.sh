#!/usr/bin/env bash
# The rooms' include rules (DESIGN.md, "Rooms"): a room includes only itself and the rooms beneath it, so
# no include goes upward and none makes a circle. Each rule lists what a room's files may include; an
# include of any other room of ours fails the test, naming the file, the line and the rule.
#   tests/room_layering_test.sh [REPO]     (a planted upward include is its self-test: see the end)
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}

# room -> the rooms its files may include (its own included)
declare -A allowed=(
  [common]="common"
  [tokenizer]="tokenizer common"
  [model]="model common"
  [model/hf]="model/hf model common"
  [dataloader]="dataloader tokenizer common"
  [distributed]="distributed common"
  [eval]="eval model dataloader tokenizer distributed common"
  [trainer]="trainer eval model/hf model dataloader tokenizer distributed common"
  [inference]="inference model common"
  [serving]="serving inference model dataloader tokenizer common"
  [launcher]="launcher serving inference trainer eval model/hf model dataloader tokenizer distributed common"
)

# check_room ROOT ROOM: prints one line per include that breaks ROOM's rule; returns 1 if any did.
check_room() {
  local root=$1 room=$2 bad=0 file line target included
  while IFS= read -r hit; do
    file=${hit%%:*}; hit=${hit#*:}; line=${hit%%:*}; included=${hit#*:}
    included=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$included")
    target=${included%/*}                 # model/hf/x.h -> model/hf; model/x.h -> model
    [[ $target == */* && $target != model/hf ]] && target=${target%%/*}
    [[ -n ${allowed[$target]+x} ]] || continue   # not a room of ours (a generated header, a .inc of a room)
    if [[ " ${allowed[$room]} " != *" $target "* ]]; then
      echo "${file#"$root"/}:$line includes $included: $room may include only ${allowed[$room]}"
      bad=1
    fi
  done < <(
    if [[ $room == model ]]; then
      find "$root/model" -path "$root/model/hf" -prune -o -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print
    else
      find "$root/$room" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \)
    fi | sort | xargs -r grep -n -H -E '^[[:space:]]*#[[:space:]]*include "[a-z_]+/' || true)
  return "$bad"
}

failed=0
for room in "${!allowed[@]}"; do
  [[ -d $repo/$room ]] || { echo "room $room is missing from $repo"; failed=1; continue; }
  check_room "$repo" "$room" || failed=1
done
(( failed == 0 )) || { echo "FAIL: includes that break the rooms' rules (above)"; exit 1; }

# Self-test: the same check must catch an upward include planted in a copy of one room.
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/tokenizer"
printf '#include "common/strprintf.h"\n#include "dataloader/token_file.h"\n' >"$scratch/tokenizer/planted.cpp"
if out=$(check_room "$scratch" tokenizer); then
  echo "FAIL: a planted include of dataloader/ in tokenizer/ was not caught"; exit 1
fi
[[ $out == *"tokenizer/planted.cpp:2 includes dataloader/token_file.h"* ]] ||
  { echo "FAIL: the planted include was reported as: $out"; exit 1; }
echo "PASS: every room includes only what DESIGN.md allows (${#allowed[@]} rooms); a planted upward include is caught"
