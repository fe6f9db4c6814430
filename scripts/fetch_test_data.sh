#!/usr/bin/env bash
# Fetches the public files the tests read (where ../shared/data, the project's copy, is absent: a fresh
# clone) into a cache, each checked against its pinned sha256 (the same files as ../shared/data/SOURCES.md
# lists): Tiny Shakespeare (karpathy/char-rnn), GPT-2's encoder.json and vocab.bpe (OpenAI's public copies,
# the sha256 tiktoken pins), gpt-tokenizer's GPT-2 test vectors, and HellaSwag's validation set in
# llama.cpp's text format (klosax/hellaswag_text_data, bunzip2ed). Files already there and whole are kept.
# The tests find the cache through tests/test_data.h and tests/lib.sh (scripts/test.sh also exports it as
# MYGPT_TEST_DATA).
#
#   scripts/fetch_test_data.sh [DIR]     DIR: default ${XDG_CACHE_HOME:-~/.cache}/mygpt-ddp/data
#   MYGPT_DATA_MIRROR=FOLDER             copy from FOLDER (the same layout) instead of downloading: a
#                                        machine without internet, given the files some other way
#
# Exit 0: every file is there. 77: offline (one line; the tests that need the missing files skip, each
# with a line). 1: a file arrived but its checksum differs (it is not kept).
set -uo pipefail

dest=${1:-${XDG_CACHE_HOME:-${HOME:-.}/.cache}/mygpt-ddp/data}
mkdir -p "$dest/gpt2" "$dest/hellaswag" || { echo "[test-data] cannot create $dest" >&2; exit 1; }

# path in the cache | URL | sha256 of the file as the tests read it (a .bz2 URL is decompressed first)
files=(
  "tinyshakespeare.txt|https://raw.githubusercontent.com/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/data/tinyshakespeare/input.txt|86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
  "gpt2/encoder.json|https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json|196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
  "gpt2/vocab.bpe|https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe|1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
  "gpt2/test_vectors.gpt-tokenizer.txt|https://raw.githubusercontent.com/niieani/gpt-tokenizer/9182f2e567355e0a8f81022b6c52bdc688250ac8/data/TestPlans.txt|d0a7902a3b2ef9ad950044663c21426323a2c860df72c9c0e73c0c03a68e7169"
  "hellaswag/hellaswag_val_full.txt|https://raw.githubusercontent.com/klosax/hellaswag_text_data/1105d370f8340eac3c63a91fd1fa58e8999f9505/hellaswag_val_full.txt.bz2|d572539320eb2050e858ca34b495bbe2103e3b3f1391a9c3bcdf215b0bb93bd1"
)

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1; else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

# get URL FILE: the bytes of URL into FILE (from the mirror when one is given).
get() {
  if [[ -n ${MYGPT_DATA_MIRROR:-} ]]; then
    local name=$3
    cp "$MYGPT_DATA_MIRROR/$name" "$2" 2>/dev/null
  elif command -v curl >/dev/null 2>&1; then
    curl -fsSL --connect-timeout 10 --max-time 300 -o "$2" "$1" 2>/dev/null
  else
    wget -q -T 10 -O "$2" "$1"
  fi
}

missing=()
offline=0  # a download failed: the others are not tried (a machine without a network would wait for each)
for entry in "${files[@]}"; do
  IFS='|' read -r path url sha <<<"$entry"
  target=$dest/$path
  [[ -f $target && $(sha256_of "$target") == "$sha" ]] && continue
  if (( offline )); then missing+=("$path"); continue; fi
  part=$target.part.$$
  if [[ -n ${MYGPT_DATA_MIRROR:-} ]]; then
    get "$url" "$part" "$path" || { missing+=("$path"); rm -f "$part"; continue; }
  elif [[ $url == *.bz2 ]]; then
    if ! command -v bunzip2 >/dev/null 2>&1; then
      echo "[test-data] $path needs bunzip2 (Debian: apt-get install bzip2); skipped"
      missing+=("$path")
      continue
    fi
    get "$url" "$part.bz2" || { missing+=("$path"); offline=1; rm -f "$part.bz2"; continue; }
    bunzip2 -c "$part.bz2" >"$part" || { echo "[test-data] $url is not bzip2 data" >&2; rm -f "$part" "$part.bz2"; exit 1; }
    rm -f "$part.bz2"
  else
    get "$url" "$part" || { missing+=("$path"); offline=1; rm -f "$part"; continue; }
  fi
  got=$(sha256_of "$part")
  if [[ $got != "$sha" ]]; then
    echo "[test-data] $url: sha256 $got, expected $sha; not kept" >&2
    rm -f "$part"
    exit 1
  fi
  chmod 644 "$part" && mv -f "$part" "$target"
  echo "[test-data] fetched $path into $dest"
done

if (( ${#missing[@]} > 0 )); then
  echo "[test-data] offline? could not fetch ${missing[*]} into $dest: the tests that need them skip"
  exit 77
fi
exit 0
