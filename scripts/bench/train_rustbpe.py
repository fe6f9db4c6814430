"""rustbpe's train_from_iterator on a JSON-lines corpus, as nanochat's tok_train feeds it (documents cut to
--doc-cap characters, taken until --max-chars have passed), streamed from the file; the learned ranks are
written as hex bytes, one id per line from 256 (for the comparison with ours, outside the timing)."""
import argparse
import json
import sys
import time

import rustbpe

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--vocab-size", type=int, required=True, help="without the special tokens, as nanochat passes it")
parser.add_argument("--pattern", required=True)
parser.add_argument("--doc-cap", type=int, default=0)
parser.add_argument("--max-chars", type=int, default=0)
parser.add_argument("--ranks-out", required=True)
args = parser.parse_args()


def documents():
    chars = 0
    with open(args.input, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            if args.doc_cap:
                text = text[:args.doc_cap]
            chars += len(text)
            yield text
            if args.max_chars and chars > args.max_chars:
                return


start = time.time()
tok = rustbpe.Tokenizer()
tok.train_from_iterator(documents(), args.vocab_size, pattern=args.pattern)
seconds = time.time() - start
ranks = sorted(tok.get_mergeable_ranks(), key=lambda pair: pair[1])
with open(args.ranks_out, "w") as f:
    f.write("".join(bytes(b).hex() + "\n" for b, _ in ranks[256:]))
print(f"RESULT {seconds:.3f}", file=sys.stderr)
