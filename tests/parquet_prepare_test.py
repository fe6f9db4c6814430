#!/usr/bin/env python3
"""`prepare` on Parquet files written here by pyarrow, judged by the references themselves.

  parquet_prepare_test.py MYGPT_DDP SHARED_DATA_DIR

Files: several row groups; each compression Arrow writes (none, snappy, zstd, gzip, brotli, lz4); string,
large_string, string_view and dictionary columns; nulls, Unicode, empty strings. Checks:
  - the train shards hold, document by document, <|endoftext|> + tiktoken's GPT-2 encode_ordinary of each
    non-null text (and `tokenizers`' with encode_special_tokens for a tokenizer.json trained here: a literal
    <|endoftext|> or <|bos|> in a document is text, not a delimiter), on 1 and on 3 threads, byte for byte the
    same shards as the JSON-lines file of the same documents gives; the nulls are counted in one note;
  - a folder (and a quoted glob) of files: sorted by name, the last file is validation, named in one line;
    with --val-tokens, the last tokens are, as for other inputs;
  - a file that is not Parquet, a truncated one, a missing column, a column of numbers, an empty file, a
    folder with other documents beside its .parquet files: one line naming the file, exit 2, no shards left;
  - --text-column names a JSON line's member as it names a Parquet column.
Exits 77 (skipped) without pyarrow or in a build without Parquet.
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

BIN, DATA = sys.argv[1], sys.argv[2]
GPT2 = os.path.join(DATA, "gpt2")
failures = []
checks = 0


def check(ok, label, detail=""):
    global checks
    checks += 1
    print(("PASS: " if ok else "FAIL: ") + label + ("" if ok else " -- " + detail))
    if not ok:
        failures.append(label)


try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:
    print("SKIP: pyarrow is not installed in the test python (scripts/setup.sh installs it)")
    sys.exit(77)


def run(*args, expect=0):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if p.returncode != expect:
        print(f"'{' '.join(args)}' exited {p.returncode}, not {expect}:\n{p.stdout}\n{p.stderr}")
    return p


def shard_tokens(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        assert header[0] == 20240520, path
        return list(struct.unpack(f"<{header[2]}H", f.read(2 * header[2])))


def shards(out, prefix):
    tokens = []
    for path in sorted(glob.glob(os.path.join(out, prefix + "_*.bin"))):
        tokens += shard_tokens(path)
    return tokens


# Documents that a careless reader or tokenizer would get wrong: Unicode of every width, combining marks,
# runs of whitespace and newlines, empty texts, texts longer than a page, and nulls.
def documents(seed):
    base = ["Hello, world!", "", "naïve café — ĉu vi parolas Esperanton?", "日本語のテキスト、そして中文。",
            "emoji 🙂🚀 and flags 🇫🇷", "  leading spaces\n\n\ntrailing  \n", "e\u0301 combining, \u00a0nbsp",
            "x" * 5000 + " long", "'s 're 12345 $%^", "line one\nline two\r\nline three", None, "Ελληνικά κείμενα",
            "a literal <|endoftext|> inside a document, and <|bos|>: text, not delimiters<|endoftext|>"]
    return [base[(i * 7 + seed) % len(base)] if (i + seed) % 9 else None for i in range(60)]


def column(texts, kind):
    strings = pa.array(texts, type=pa.string())
    if kind == "dictionary":
        return strings.dictionary_encode()
    return strings.cast({"string": pa.string(), "large_string": pa.large_string(), "string_view": pa.string_view()}[kind])


def write_parquet(path, texts, kind, compression):
    table = pa.table({"id": pa.array(range(len(texts)), type=pa.int64()), "text": column(texts, kind)})
    pq.write_table(table, path, compression=compression, row_group_size=7)
    assert pq.ParquetFile(path).metadata.num_row_groups > 1


def prepare(inputs, out, *extra, expect=0):
    shutil.rmtree(out, ignore_errors=True)
    return run("prepare", *inputs, "--out", out, "--quiet", *extra, expect=expect)


work = tempfile.mkdtemp(prefix="mygpt_parquet.")
try:
    kinds = ["string", "large_string", "string_view", "dictionary"]
    compressions = ["none", "snappy", "zstd", "gzip", "brotli", "lz4"]
    files, all_texts = [], []
    for i, compression in enumerate(compressions):
        texts = documents(i)
        path = os.path.join(work, f"part_{i}.parquet")
        write_parquet(path, texts, kinds[i % len(kinds)], compression)
        files.append(path)
        all_texts += texts
    # The same documents as JSON lines (nulls left out).
    jsonl = os.path.join(work, "docs.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        for text in all_texts:
            if text is not None:
                f.write(json.dumps({"text": text}) + "\n")
    texts = [t for t in all_texts if t is not None]
    nulls = len(all_texts) - len(texts)

    probe = prepare([files[0]], os.path.join(work, "probe"), "--tokenizer", "char", "--val-tokens", "0")
    if "this build reads no Parquet" in probe.stderr:
        print("SKIP: this build has no Parquet support: " + probe.stderr.strip())
        sys.exit(77)

    # --- tokens against tiktoken (GPT-2) and tokenizers (a tokenizer.json), on 1 and 3 threads ----------
    vocabularies = []
    if os.path.exists(os.path.join(GPT2, "encoder.json")):
        try:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "bench"))
            from tokenize_tiktoken import gpt2_encoding
            enc = gpt2_encoding(GPT2)
            vocabularies.append(("tiktoken gpt2", ["--vocab", GPT2, "--tokenizer", "gpt2"], enc.encode_ordinary, 50256))
        except ImportError:
            print("SKIP: tiktoken is not installed in the test python: no GPT-2 comparison")
    else:
        print(f"SKIP: no GPT-2 files in {GPT2}: no tiktoken comparison")
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
        hf_dir = os.path.join(work, "hf")
        os.makedirs(hf_dir)
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(texts * 3, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.save(os.path.join(hf_dir, "tokenizer.json"))
        tok.encode_special_tokens = True  # a special token's text in a document is text, as prepare encodes it
        vocabularies.append(("tokenizers tokenizer.json", ["--vocab", hf_dir, "--tokenizer", "hf"],
                             lambda t: tok.encode(t, add_special_tokens=False).ids, tok.token_to_id("<|endoftext|>")))
    except ImportError:
        print("SKIP: tokenizers is not installed in the test python: no tokenizer.json comparison")
    if not vocabularies:
        print("SKIP: neither tiktoken with GPT-2's files nor tokenizers to compare with")
        sys.exit(77)

    for name, vocab_args, encode, eot in vocabularies:
        expected = []
        for text in texts:
            expected += [eot] + encode(text)
        runs = {}
        for threads in ("1", "3"):
            out = os.path.join(work, f"out_{threads}")
            p = prepare(files, out, *vocab_args, "--val-tokens", "0", "--threads", threads)
            runs[threads] = out
            check(p.returncode == 0, f"{name}: prepare of {len(files)} Parquet files on {threads} thread(s) succeeds")
            got = shards(out, "train")
            first_bad = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
            check(got == expected, f"{name}: {threads} thread(s): the {len(texts)} documents' tokens equal {name}'s",
                  f"{len(got)} tokens against {len(expected)}, first difference at {first_bad}")
            check(f"skipped {nulls} Parquet row(s) whose 'text' is null, in {len(files)} file(s)" in p.stdout,
                  f"{name}: {threads} thread(s): one note counts the {nulls} nulls", p.stdout)
        same = all(open(a, "rb").read() == open(b, "rb").read() for a, b in
                   zip(sorted(glob.glob(runs["1"] + "/train_*.bin")), sorted(glob.glob(runs["3"] + "/train_*.bin"))))
        check(same, f"{name}: the shards on 1 and 3 threads are the same, byte for byte")
        out_json = os.path.join(work, "out_json")
        prepare([jsonl], out_json, *vocab_args, "--val-tokens", "0", "--threads", "3")
        check(open(out_json + "/train_000000.bin", "rb").read() == open(runs["3"] + "/train_000000.bin", "rb").read(),
              f"{name}: the Parquet shards equal the JSON-lines shards of the same documents")

    # --- the folder contract --------------------------------------------------------------------------
    folder = os.path.join(work, "folder")
    os.makedirs(folder)
    # Written in another order than their names': the name decides.
    for name, seed in (("shard_02.parquet", 2), ("shard_00.parquet", 0), ("shard_01.parquet", 1)):
        write_parquet(os.path.join(folder, name), [f"document {seed} {k}" for k in range(20)], "string", "zstd")
    open(os.path.join(folder, "README.md"), "w").write("not a shard")  # not a kind of document prepare reads
    for label, given in (("folder", folder), ("glob", os.path.join(folder, "shard_*.parquet"))):
        out = os.path.join(work, "out_folder")
        p = prepare([given], out, "--tokenizer", "char")
        check(p.returncode == 0 and "validation: " + os.path.join(folder, "shard_02.parquet") in p.stdout,
              f"{label}: the last file by name becomes validation, said in one line", p.stdout + p.stderr)
        vocab = open(os.path.join(out, "char_vocab.txt"), encoding="utf-8").read()
        decode = lambda ids: "".join(vocab[i] for i in ids)  # noqa: E731
        val, train = decode(shards(out, "val")), decode(shards(out, "train"))
        check(val == "".join(f"document 2 {k}" for k in range(20)) and "document 2" not in train
              and train.startswith("document 0 0") and "document 1 19" in train,
              f"{label}: val holds the last file alone, train the others in name order", f"val {val[:60]!r}")
    p = prepare([folder], os.path.join(work, "out_folder"), "--tokenizer", "char", "--val-tokens", "12")
    check(p.returncode == 0 and "validation:" not in p.stdout and len(shards(os.path.join(work, "out_folder"), "val")) == 12,
          "folder with --val-tokens: the last 12 tokens validate, as for other inputs", p.stdout)
    one = os.path.join(work, "one")
    os.makedirs(one)
    write_parquet(os.path.join(one, "a.parquet"), ["x"] * 10, "string", "none")
    p = prepare([one], os.path.join(work, "out_one"), "--tokenizer", "char", expect=2)
    check(p.returncode == 2 and "holds one file" in p.stderr, "a folder of one file without --val-tokens is refused", p.stderr)

    # --- bad files: one line naming the file, exit 2, no shards ---------------------------------------
    not_parquet = os.path.join(work, "text.parquet")
    open(not_parquet, "w").write("just some text, no Parquet here\n" * 10)
    truncated = os.path.join(work, "truncated.parquet")
    data = open(files[2], "rb").read()
    open(truncated, "wb").write(data[: len(data) // 2])
    cut_inside = os.path.join(work, "cut_inside.parquet")
    # The footer intact, the text column's pages of the second row group overwritten: the damage shows
    # only when those pages are read, after the first row group's documents.
    chunk = pq.ParquetFile(files[2]).metadata.row_group(1).column(1)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    damaged = bytearray(data)
    damaged[start:start + 64] = b"\xff" * 64
    open(cut_inside, "wb").write(bytes(damaged))
    cases = [(not_parquet, [], "text.parquet"), (truncated, [], "truncated.parquet"),
             (cut_inside, [], "cut_inside.parquet"),
             (files[0], ["--text-column", "content"], "has no column 'content' (--text-column); its columns: id, text"),
             (files[0], ["--text-column", "id"], "column 'id' holds int64, not strings")]
    for path, extra, needle in cases:
        out = os.path.join(work, "out_bad")
        p = prepare([path], out, "--tokenizer", "char", "--val-tokens", "0", *extra, expect=2)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and needle in lines[0] and path in lines[0]
              and not glob.glob(out + "/*.bin"),
              f"{os.path.basename(path)} {' '.join(extra)}: one line naming the file, exit 2, no shards",
              f"exit {p.returncode}: {p.stderr.strip()}")
    # Another column by name.
    renamed = os.path.join(work, "content.parquet")
    pq.write_table(pa.table({"content": pa.array(["abc", "de"])}), renamed)
    p = prepare([renamed], os.path.join(work, "out_col"), "--tokenizer", "char", "--val-tokens", "0",
                "--text-column", "content")
    check(p.returncode == 0 and len(shards(os.path.join(work, "out_col"), "train")) == 5,
          "--text-column content reads that column (5 characters of 2 documents)", p.stderr)
    # Issue 64: --text-column names a JSON line's member too (it was ignored: always "text").
    renamed_lines = os.path.join(work, "content.jsonl")
    open(renamed_lines, "w").write('{"text": "no", "content": "abc"}\n{"content": "de"}\n')
    p = prepare([renamed_lines], os.path.join(work, "out_col_jsonl"), "--tokenizer", "char", "--val-tokens", "0",
                "--text-column", "content")
    check(p.returncode == 0 and open(os.path.join(work, "out_col_jsonl", "train_000000.bin"), "rb").read()
          == open(os.path.join(work, "out_col", "train_000000.bin"), "rb").read(),
          "--text-column content reads that member of JSON lines: the Parquet file's shards, byte for byte", p.stderr)
    # Issue 64: a Parquet file of no rows is said to be empty, not "all 0 tokens went to validation: lower
    # --val-tokens"; and a folder that holds other documents beside its .parquet files is refused, naming them
    # (it said "holds one file" and skipped them in silence).
    empty = os.path.join(work, "empty.parquet")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), empty)
    for extra in ([], ["--val-tokens", "0"]):
        p = prepare([empty], os.path.join(work, "out_empty"), "--tokenizer", "char", *extra, expect=2)
        lines = p.stderr.strip().splitlines()
        said_empty = bool(lines) and f"'{empty}' holds no documents (a Parquet file of 0 rows)" in lines[0]
        check(p.returncode == 2 and len(lines) == 1 and said_empty and "--val-tokens" not in lines[0], f"an empty Parquet file {' '.join(extra)}: said empty",
              p.stderr)
    mixed = os.path.join(work, "mixed")
    os.makedirs(mixed)
    write_parquet(os.path.join(mixed, "a.parquet"), ["x"] * 10, "string", "none")
    open(os.path.join(mixed, "b.jsonl"), "w").write('{"text": "y"}\n')
    open(os.path.join(mixed, "c.txt"), "w").write("z\n")
    p = prepare([mixed], os.path.join(work, "out_mixed"), "--tokenizer", "char", expect=2)
    check(p.returncode == 2 and "holds 1 .parquet file(s) and other documents (b.jsonl, c.txt)" in p.stderr
          and "holds one file" not in p.stderr, "a folder of .parquet, .jsonl and .txt: refused, the others named",
          p.stderr)
finally:
    shutil.rmtree(work, ignore_errors=True)

print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures or checks == 0 else 0)
