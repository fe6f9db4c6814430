"""Whether a tokenizer.json's tokens from id 256 are the bytes rustbpe learned: prints "yes" and exits 0, or
prints "NO (counts, first difference)" and exits 1.
    compare_trained_ranks.py TOKENIZER_JSON RANKS
RANKS is rustbpe's ranks from id 256 as hex bytes in either form written here: one a line
(scripts/bench/train_rustbpe.py --ranks-out), or a JSON list with one list per job, of which the first is
compared (tests/bpe_trainer_reference.py rustbpe)."""
import json
import sys

# GPT-2's byte alphabet (bytes_to_unicode), back from the vocabulary's spelling to the bytes.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
cs = bs[:]
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + len(cs) - 188)
byte_of = {chr(c): b for b, c in zip(bs, cs)}

tokenizer_json, ranks_path = sys.argv[1], sys.argv[2]
vocab = json.load(open(tokenizer_json, encoding="utf-8"))["model"]["vocab"]
by_id = {i: s for s, i in vocab.items()}
ours = [bytes(byte_of[ch] for ch in by_id[i]).hex() for i in range(256, len(by_id))]
ranks_text = open(ranks_path, encoding="utf-8").read()
# Hex lines never start with '[': a JSON list does.
theirs = json.loads(ranks_text)[0] if ranks_text.lstrip().startswith("[") else ranks_text.split()
if ours == theirs:
    print("yes")
    sys.exit(0)
diff = [k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b]
first = f", first at id {256 + diff[0]}: {ours[diff[0]]} vs {theirs[diff[0]]}" if diff else ""
print(f"NO ({len(ours)} vs {len(theirs)} merges{first})")
sys.exit(1)
