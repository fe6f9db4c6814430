"""Hugging Face `tokenizers` as the reference for our tokenizer.json reader (tests/test_hf_bpe_tokenizer.cpp).

  make-gpt2 GPT2_DIR OUT_DIR       GPT-2's tokenizer.json from encoder.json + vocab.bpe (as transformers
                                    writes it for GPT2TokenizerFast), merges as [a, b]; and OUT_DIR/strings/
                                    the same with "a b" merges
  make-gpt4 TEXT OUT_DIR           a small BPE trained on TEXT with nanochat's GPT-4-style Split pattern and
                                    ByteLevel(use_regex=False), special tokens included
  variants GPT4_DIR OUT_DIR         that tokenizer with other pre-tokenizers (each Split behaviour, Digits,
                                    ByteLevel's prefix space and regex), added tokens with lstrip, rstrip and
                                    single_word, and ignore_merges: OUT_DIR/<name>/tokenizer.json
  texts SHAKESPEARE HELLASWAG OUT  the texts the test compares on (real text and random Unicode), as JSON
  encode TOKENIZER_JSON TEXTS OUT  tokenizers' ids (add_special_tokens=False) and decoded text of each text
  encode-specials-as-text ...      the same with encode_special_tokens = True (special tokens' text is text)
  auto DIR TEXTS OUT               the same through transformers' AutoTokenizer.from_pretrained(DIR)
Prints one JSON line last: {"ok": true}.
"""
import json
import os
import random
import sys


def make_gpt2(gpt2_dir, out_dir):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    with open(os.path.join(gpt2_dir, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(gpt2_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges = [tuple(line.split(" ")) for line in f.read().split("\n")[1:] if line]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=True)])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer.json"), encoding="utf-8") as f:
        data = json.load(f)
    data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    os.makedirs(os.path.join(out_dir, "strings"), exist_ok=True)
    with open(os.path.join(out_dir, "strings", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)


# nanochat's SPLIT_PATTERN (GPT-4's with \p{N}{1,2}).
GPT4_STYLE = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""


def make_gpt4(text_path, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern=Regex(GPT4_STYLE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=2048, show_progress=False, min_frequency=0,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=specials)
    tok.train([text_path], trainer)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))


def variants(gpt4_dir, out_dir):
    from tokenizers import AddedToken, Regex, Tokenizer, pre_tokenizers
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    words = Regex(r"\p{L}+")
    changes = {
        "merged_with_previous": [pre_tokenizers.Split(words, "merged_with_previous"), byte_level],
        "merged_with_next": [pre_tokenizers.Split(words, "merged_with_next"), byte_level],
        "contiguous": [pre_tokenizers.Split(Regex(r"\s"), "contiguous"), byte_level],
        "removed_inverted": [pre_tokenizers.Split(Regex(r"[0-9]+"), "removed", invert=True), byte_level],
        "string_split": [pre_tokenizers.Split(" ", "isolated"), byte_level],
        "digits_prefix_space": [pre_tokenizers.Digits(individual_digits=True),
                                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)],
    }
    for name, steps in list(changes.items()) + [("added_tokens", None), ("ignore_merges", None)]:
        tok = Tokenizer.from_file(os.path.join(gpt4_dir, "tokenizer.json"))
        if steps is not None:
            tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
        if name == "added_tokens":
            tok.add_tokens([AddedToken("hello", single_word=True), AddedToken("<mask>", lstrip=True, rstrip=True),
                            AddedToken("ab", normalized=False)])
        path = os.path.join(out_dir, name, "tokenizer.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tok.save(path)
        if name == "ignore_merges":
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            data["model"]["ignore_merges"] = True
            with open(path, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False)


def random_unicode(rng, length):
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  \t", "\n", "\r\n",
        "'s", "'LL", "'Ve", "'d", ".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`",
        "\u00a0\u2000\u2028\u3000\u200b\u180e\u0085", "éàüßñçøåæœ", "αβγδεζηθΩΣ", "абвгдеёжзийЖЩЯ",
        "中文字符测试你好世界汉字", "ひらがなカタカナ", "한국어텍스트", "عربيةنص", "हिन्दीपाठ", "ไทย",
        "\u0301\u0308\u0327\u0323\u036f", "😀😂🥲🤖👍🏽👨‍👩‍👧‍👦🇫🇷❤️✨", "①②³¼Ⅷ٣६", "<|endoftext|>", "<|bos|>", "hello", " <mask> ",
    ]
    out = []
    for _ in range(length):
        pool = rng.choice(pools)
        if pool in ("<|endoftext|>", "<|bos|>", "hello", " <mask> ", "'s", "'LL", "'Ve", "'d", "\r\n"):
            out.append(pool)
        elif pool in (" ", "  \t", "\n", "0123456789"):
            out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 7))))  # runs
        else:
            out.append(rng.choice(pool))
    return "".join(out)


def texts(shakespeare, hellaswag, out):
    rng = random.Random(41)
    result = {}
    if os.path.exists(shakespeare):
        with open(shakespeare, encoding="utf-8") as f:
            result["shakespeare"] = f.read()
    if os.path.exists(hellaswag):
        with open(hellaswag, encoding="utf-8") as f:
            result["hellaswag"] = f.read()[:2_000_000]
    for i in range(400):
        result[f"random {i}"] = random_unicode(rng, rng.randint(1, 60))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)


def encode_with(encode, decode, texts_path, out):
    with open(texts_path, encoding="utf-8") as f:
        named = json.load(f)
    result = {}
    for name, text in named.items():
        ids = encode(text)
        result[name] = {"ids": ids, "decoded": decode(ids)}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "make-gpt2":
        make_gpt2(*args)
    elif mode == "make-gpt4":
        make_gpt4(*args)
    elif mode == "variants":
        variants(*args)
    elif mode == "texts":
        texts(*args)
    elif mode in ("encode", "encode-specials-as-text"):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(args[0])
        tok.encode_special_tokens = mode == "encode-specials-as-text"
        encode_with(lambda t: tok.encode(t, add_special_tokens=False).ids,
                    lambda ids: tok.decode(ids, skip_special_tokens=False), args[1], args[2])
    elif mode == "auto":
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(args[0])
        encode_with(lambda t: tok.encode(t, add_special_tokens=False),
                    lambda ids: tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False),
                    args[1], args[2])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    main()
