"""rustbpe (nanochat's BPE trainer), tokenizers and tiktoken as the references for `tokenizer train`
(tests/test_bpe_trainer.cpp, tests/tokenizer_train_test.sh).

  random-docs OUT                    random Unicode documents (tokenizer_reference.py's strings) as a JSON list
  rustbpe JOBS OUT                   for each job {"docs": JSON list file, "vocab": N, "pattern": regex}: the
                                     bytes (hex) of each id rustbpe learns from 256 on, as rustbpe's
                                     train_from_iterator(docs, N, pattern=regex) and get_mergeable_ranks give them
  ids TOKENIZER_JSON JOB TEXTS OUT   the ids of each text by tokenizers (the file, add_special_tokens=False) and by
                                     tiktoken (rustbpe's ranks for JOB, its pattern, the special tokens of the
                                     file after them, allowed_special="all"), as nanochat's tokenizer encodes
Prints one JSON line last: {"ok": true}.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def random_docs(out):
    from tokenizer_reference import random_unicode
    rng = random.Random(57)
    docs = [random_unicode(rng, rng.randint(1, 200)) for _ in range(1500)]
    with open(out, "w", encoding="utf-8") as f:
        json.dump(docs, f, ensure_ascii=False)


def train(job):
    import rustbpe
    with open(job["docs"], encoding="utf-8") as f:
        docs = json.load(f)
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(docs), job["vocab"], pattern=job["pattern"])
    return sorted(tok.get_mergeable_ranks(), key=lambda pair: pair[1])


def rustbpe_ranks(jobs_path, out):
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    result = []
    for job in jobs:
        ranks = train(job)
        assert [rank for _, rank in ranks] == list(range(len(ranks)))
        result.append([bytes(b).hex() for b, _ in ranks[256:]])
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)


def ids(tokenizer_json, job_path, texts_path, out):
    import tiktoken
    from tokenizers import Tokenizer
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    with open(texts_path, encoding="utf-8") as f:
        texts = json.load(f)
    ranks = train(job)
    hf = Tokenizer.from_file(tokenizer_json)
    with open(tokenizer_json, encoding="utf-8") as f:
        specials = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    enc = tiktoken.Encoding(name="trained", pat_str=job["pattern"],
                            mergeable_ranks={bytes(b): rank for b, rank in ranks}, special_tokens=specials)
    result = {"tokenizers": [hf.encode(t, add_special_tokens=False).ids for t in texts],
              "tiktoken": [enc.encode(t, allowed_special="all") for t in texts]}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)


def main():
    command, args = sys.argv[1], sys.argv[2:]
    {"random-docs": random_docs, "rustbpe": rustbpe_ranks, "ids": ids}[command](*args)
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    main()
