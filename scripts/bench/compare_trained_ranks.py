"""Whether a tokenizer.json's tokens from id 256 are the bytes rustbpe learned (hex, one a line): prints
"yes" or "NO (first difference)"."""
import json
import sys

bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
cs = bs[:]
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + len(cs) - 188)
byte_of = {chr(c): b for b, c in zip(bs, cs)}
vocab = json.load(open(sys.argv[1], encoding="utf-8"))["model"]["vocab"]
by_id = {i: s for s, i in vocab.items()}
ours = [bytes(byte_of[ch] for ch in by_id[i]).hex() for i in range(256, len(by_id))]
theirs = open(sys.argv[2]).read().split()
if ours == theirs:
    print("yes")
else:
    diff = [k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    print(f"NO ({len(ours)} vs {len(theirs)} merges" + (f", first at id {256 + diff[0]}" if diff else "") + ")")
