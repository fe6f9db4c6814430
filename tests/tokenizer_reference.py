"""Hugging Face `tokenizers` as the reference for our tokenizer.json reader (tests/test_hf_bpe_tokenizer.cpp).

  make-gpt2 GPT2_DIR OUT_DIR       GPT-2's tokenizer.json from encoder.json + vocab.bpe (as transformers
                                    writes it for GPT2TokenizerFast), merges as [a, b]; and OUT_DIR/strings/
                                    the same with "a b" merges
  make-gpt4 TEXT OUT_DIR           a small BPE trained on TEXT with nanochat's GPT-4-style Split pattern and
                                    ByteLevel(use_regex=False), special tokens included
  variants GPT4_DIR OUT_DIR         that tokenizer with other pre-tokenizers (each Split behaviour, Digits,
                                    ByteLevel's prefix space and regex), added tokens with lstrip, rstrip and
                                    single_word, and ignore_merges: OUT_DIR/<name>/tokenizer.json
  cut-variants GPT4_DIR OUT_DIR     that tokenizer with the pre-tokenizers and added tokens prepare's cuts must
                                    respect (ByteLevel's prefix space and regex, Llama 3's, Qwen2's and GPT-2's
                                    Split, Digits first, lstrip or rstrip alone): OUT_DIR/<name>/tokenizer.json
  long-text OUT                    one text of about 100 KB whose lines start and end with what a cut must get
                                    right (letters, digits, spaces, punctuation, added tokens, '/'); the same
                                    lines with CRLF line ends; and about 60 KB of CJK lines (ending and starting
                                    with CJK letters, punctuation, fullwidth forms, spaces of every kind, marks,
                                    characters NFKC makes spaces), LF and CRLF; as JSON {"long", "crlf", "cjk"}
  make-normalized TEXT OUT_DIR     small BPEs trained on TEXT with a Unicode normalizer, as Qwen2/Qwen3's
                                    tokenizer.json has one: OUT_DIR/nfc (NFC, Qwen2's Split pattern and
                                    ByteLevel(use_regex=False)), OUT_DIR/nfkc (the same with NFKC) and
                                    OUT_DIR/sequence_nfc (Sequence([NFC]) with GPT-2's ByteLevel); each with
                                    added tokens matched on the raw text and on the normalized text
  texts SHAKESPEARE HELLASWAG OUT  the texts the test compares on (real text and random Unicode), as JSON
  classes OUT                      the code points Oniguruma's \\w, \\d, \\s and \\p{L}, \\p{N}, ... match, as
                                    tokenizers runs them, as ranges (JSON)
  normalization-texts SHAKESPEARE OUT  texts for the normalizers: Shakespeare, decomposed and compatibility
                                    characters, random strings of combining marks, Hangul jamo, the marks of
                                    every Unicode version (tokenizers' tables are 9.0's) and random code points
  encode TOKENIZER_JSON TEXTS OUT  tokenizers' ids (add_special_tokens=False) and decoded text of each text
  encode-specials-as-text ...      the same with encode_special_tokens = True (special tokens' text is text)
  tiktoken-gpt2 GPT2_DIR TEXTS OUT tiktoken's GPT-2 encode_ordinary of each text (from encoder.json and vocab.bpe)
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
        # GPT-4o's style: letters by case (\p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}) and marks (\p{M}), and
        # a negated property (\P{N}) outside a class.
        "cased_letters": [pre_tokenizers.Split(Regex(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"), "isolated"), byte_level],
        "negated_property": [pre_tokenizers.Split(Regex(r"\P{N}+"), "isolated"), byte_level],
        # Oniguruma's \w (with marks and connector punctuation), \d, \W and \b: the Whitespace pre-tokenizer's
        # own pattern, and word boundaries.
        "word_classes": [pre_tokenizers.Split(Regex(r"\w+|[^\w\s]+"), "isolated"), byte_level],
        "boundaries": [pre_tokenizers.Split(Regex(r"\b\w|\d+|\W+\B"), "isolated"), byte_level],
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


# Llama 3's pre-tokenizer pattern, from its tokenizer.json.
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def cut_variants(gpt4_dir, out_dir):
    from tokenizers import AddedToken, Regex, Tokenizer, pre_tokenizers
    no_regex = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    changes = {
        "prefix_space": pre_tokenizers.ByteLevel(add_prefix_space=True),
        "byte_level_regex": pre_tokenizers.ByteLevel(add_prefix_space=False),
        "split_then_prefix_space": pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT4_STYLE), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)]),
        "llama3": pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), "isolated"), no_regex]),
        "qwen2_after_digits": pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=False), pre_tokenizers.Split(Regex(QWEN2), "isolated"), no_regex]),
        "gpt2_split": pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(GPT2_PATTERN), "isolated"), no_regex]),
        "no_regex": no_regex,
    }
    added = {
        "lstrip": [AddedToken("<mask>", lstrip=True)],
        "rstrip": [AddedToken("<sep>", rstrip=True)],
        "lstrip_special": [AddedToken("<|endoftext|>", lstrip=True, special=True)],
    }
    for name in list(changes) + list(added):
        tok = Tokenizer.from_file(os.path.join(gpt4_dir, "tokenizer.json"))
        if name in changes:
            tok.pre_tokenizer = changes[name]
        elif added[name][0].special:
            tok.add_special_tokens(added[name])
        else:
            tok.add_tokens(added[name])
        path = os.path.join(out_dir, name, "tokenizer.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tok.save(path)


def long_text(out):
    """Lines that begin and end with each kind of character a cut sits between: letters, digits, punctuation,
    '/', a space, and added tokens (<mask>, <sep>, hello, <|endoftext|>, <|bos|>); blank lines; non-ASCII."""
    rng = random.Random(53)
    words = ["the", "King", "said", "hello", "thou", "art", "ROMEO", "don't", "we'll", "caf\u00e9", "na\u00efve",
             "\u4e2d\u6587", "2024", "7", "x1", "A\u030a"]
    starts = ["", "", "", " ", "  ", "<mask>", " <mask>", "<sep>", "hello ", "<|endoftext|>", "<|bos|>", "/", ".",
              "'s ", "12", "\t", "(", "-", "cafe\u0301"]
    ends = ["", "", ".", ",", "!", "<mask>", "<sep>", " ", "  ", " hello", "<|endoftext|>", ":", "'", "9", ".\r", "A\u030a!"]
    lines = []
    while sum(len(line) + 1 for line in lines) < 100_000:
        body = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.1:
            body += random_unicode(rng, rng.randint(1, 20)).replace("\n", " ")
        lines.append(rng.choice(starts) + body + rng.choice(ends))
        if rng.random() < 0.05:
            lines.append("")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"long": "\n".join(lines) + "\n", "crlf": "\r\n".join(lines) + "\r\n", "cjk": cjk_text(rng)}, f,
                  ensure_ascii=False)


def cjk_text(rng):
    """Lines of Chinese, Japanese and Korean whose ends are mostly not ASCII: CJK letters, CJK and fullwidth
    punctuation, fullwidth digits; now and then what a cut must not sit next to: spaces of other kinds (U+3000,
    U+00A0), a zero-width space, combining marks, Hangul jamo that compose across nothing, characters NFKC turns
    into a space and a mark (U+00A8, U+309B), halfwidth katakana and its voiced mark; a space to start a line;
    LF and CRLF line ends."""
    words = ["中文", "汉字", "测试", "你好", "世界", "日本語", "ひらがな", "カタカナ", "한국어", "텍스트", "東京", "２０２４",
             "ｶﾞｷﾞ", "Ｈｅｌｌｏ", "①②", "Ⅷ", "😀"]
    edges = ["", "", "", "", "。", "、", "「", "」", "！", "？", "（", "）", "：", "１２", "・", "…", "〜", "中", "語", "가"]
    rare = ["\u3000", "\u00a0", "\u200b", "\u0301", "\u1100", "\u1161", "\u00a8", "\u309b", "ﾞ", "a", "7", ".",
            " ", "<mask>", "<|endoftext|>", "\t"]
    lines, size = [], 0
    while size < 60_000:
        edge = lambda: rng.choice(rare) if rng.random() < 0.12 else rng.choice(edges)  # noqa: E731
        body = "".join(rng.choice(words) + (rng.choice("、，　 ") if rng.random() < 0.2 else "")
                       for _ in range(rng.randint(1, 10)))
        line = (" " if rng.random() < 0.15 else "") + edge() + body + edge()
        lines.append(line + ("\r\n" if rng.random() < 0.3 else "\n"))
        size += len(lines[-1].encode("utf-8"))
    return "".join(lines)


# Qwen2's (and Qwen3's) pre-tokenizer pattern, from their tokenizer.json.
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Added tokens of the normalized tokenizers: a special one matched on the raw text (as Qwen's), one matched on
# the normalized text whose content is not NFC (tokenizers matches its NFC form), and one matched on the raw
# text whose content is not NFC (only its decomposed spelling matches).
NORMALIZED_ADDED = ["cafe\u0301", "<|endoftext|>", "A\u030a!"]


def make_normalized(text_path, out_dir):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    qwen_style = pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern=Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    kinds = {
        "nfc": (normalizers.NFC(), qwen_style),
        "nfkc": (normalizers.NFKC(), qwen_style),
        "sequence_nfc": (normalizers.Sequence([normalizers.NFC()]), pre_tokenizers.ByteLevel(add_prefix_space=False)),
    }
    for name, (normalizer, pre_tokenizer) in kinds.items():
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizer
        tok.pre_tokenizer = pre_tokenizer
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=1024, show_progress=False, min_frequency=0,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      special_tokens=[AddedToken("<|endoftext|>", special=True, normalized=False)])
        tok.train([text_path], trainer)
        tok.add_tokens([AddedToken(NORMALIZED_ADDED[0], normalized=True),
                        AddedToken(NORMALIZED_ADDED[2], normalized=False)])
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        tok.save(os.path.join(out_dir, name, "tokenizer.json"))


def combining_marks():
    """Every character Python's Unicode database gives a combining class, with those it adds to a decomposition,
    assigned by Unicode 9.0 or later: tokenizers' tables are 9.0's, so the later ones (U+1DF6, U+1DFA,
    U+11938's parts) must be left as they are while the older ones around them are reordered and composed."""
    import unicodedata
    marks = set()
    for cp in range(0x110000):
        c = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if unicodedata.combining(c):
            marks.add(c)
        d = unicodedata.decomposition(c)
        if d and not d.startswith("<"):
            marks.update(chr(int(x, 16)) for x in d.split())
    # Unicode 15's marks, which Python 3.11's database (14.0) lacks but utf8proc 2.8 knows: Arabic, Kawi,
    # Cyrillic, Kaktovik-era additions with combining classes 220, 9 and 230.
    marks.update("\U00010efd\U00010efe\U00010eff\U00011f41\U00011f42\U0001e08f")
    return sorted(marks)


def normalization_texts(shakespeare, out):
    rng = random.Random(37)
    result = {}
    if os.path.exists(shakespeare):
        with open(shakespeare, encoding="utf-8") as f:
            result["shakespeare"] = f.read()
    fixed = [
        "e\u0301", "cafe\u0301 cafe\u0301s caf\u00e9", "A\u030a! \u00c5! A\u030a \u212b!",
        "\u1100\u1161\u11a8 \u1112\u1161\u11ab",
        "\ufb01 \ufb02 \u2460 \u00b3 \u00bc \u2167 \uff21 \u3000 \u2126 \u00c5 \u0344 \u0f73",
        "a\u0323\u0301 a\u0301\u0323 q\u0307\u0323 \u1e0b\u0323 \u0958 \u05e9\u05bc\u05c1 \uf900 \U0002f800",
        "e<|endoftext|>\u0301 <|endoftext|>\u0308a \u0301", "\u0301\u0301\u0301 leading marks",
        "Z\u0335\u0357\u0341\u0315\u0358\u035c\u0361\u0322\u0327\u0328 zalgo",
        # Assigned after Unicode 9.0: to tokenizers they are starters that block reordering and composition.
        "a\u1df6\u0316 e\u1df6\u0301 a\u1dfa\u0301 o\u0301\u1dfa\u0316 \U00011935\U00011930 \U00011938 x\u0301\U00010efd\u0316",
    ]
    for i, text in enumerate(fixed):
        result[f"fixed {i}"] = text
    marks = [chr(c) for c in range(0x0300, 0x0370)] + ["\u0591", "\u05b0", "\u05bc", "\u05c1", "\u093c", "\u094d",
                                                       "\u3099", "\u309a", "\u0e38", "\u0f71", "\u0f72", "\u0f74"]
    bases = list("aeiouAEIOUcnsyzwCNSYZ \u0915\u0926\u3046\u304b\u30cf\u05d0\u05e9\u0e01\u0f40\u03b1\u03c9\u0438")
    jamo = [chr(c) for c in list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) + list(range(0x11a8, 0x11c3))]
    for i in range(150):
        out_chars = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            pool = marks if r < 0.4 else jamo if r < 0.6 else bases
            out_chars.append(rng.choice(pool))
        result[f"marks {i}"] = "".join(out_chars)
    for i in range(150):
        result[f"pools {i}"] = random_unicode(rng, rng.randint(1, 60)) + rng.choice(NORMALIZED_ADDED)
    # Combining marks of every Unicode version between bases, so that marks tokenizers knows (9.0) and marks
    # it does not are reordered and composed together.
    every_mark = combining_marks()
    for i in range(150):
        result[f"every mark {i}"] = "".join(
            rng.choice(bases) if r < 0.3 else rng.choice(every_mark) for r in (rng.random() for _ in range(rng.randint(1, 40))))
    # Any code point but a surrogate, most from below U+3400 (the alphabets, their combining marks, symbols;
    # CJK and the private use planes would otherwise be nearly every draw): assigned by Unicode 9.0, later,
    # or not at all.
    for i in range(200):
        chars = []
        for r in (rng.random() for _ in range(rng.randint(1, 40))):
            cp = 0xD800
            while 0xD800 <= cp <= 0xDFFF:
                cp = rng.randrange(0x3400) if r < 0.8 else rng.randrange(0x110000)
            chars.append(" " if r < 0.15 else chr(cp))
        result[f"code points {i}"] = "".join(chars)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)


def random_unicode(rng, length):
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  \t", "\n", "\r\n",
        "'s", "'LL", "'Ve", "'d", ".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`",
        "\u00a0\u2000\u2028\u3000\u200b\u180e\u0085", "éàüßñçøåæœ", "αβγδεζηθΩΣ", "абвгдеёжзийЖЩЯ",
        "中文字符测试你好世界汉字", "ひらがなカタカナ", "한국어텍스트", "عربيةنص", "हिन्दीपाठ", "ไทย",
        "\u0301\u0308\u0327\u0323\u036f",
        # Letters, digits and marks of Unicode 15 and 16 (CJK Extension H, Kawi, Nag Mundari, Garay, Kirat
        # Rai): \p{L}, \p{N} and \p{M} for tokenizers' regex, unassigned for the PCRE2 of Debian 12.
        "\U00031350\U000323af\U00011f04\U00011f12\U0001e4d0\U0001e030\U00010d4a\U00016d40\U0001e4f1\U00011f51\u0897",
        "😀😂🥲🤖👍🏽👨‍👩‍👧‍👦🇫🇷❤️✨", "①②³¼Ⅷ٣६", "<|endoftext|>", "<|bos|>", "hello", " <mask> ",
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


def classes(out):
    """For each pattern class below, the code points tokenizers' regex engine (Oniguruma) matches, as
    [first, last] ranges, read off it over every code point but the surrogates."""
    from tokenizers import Regex, pre_tokenizers
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    text = "".join(chr(cp) for cp in cps)  # offsets are in characters: offset i is cps[i]
    result = {}
    for pattern in [r"\w", r"\d", r"\s", r"\p{L}", r"\p{N}", r"\p{M}", r"\p{Lu}", r"\p{P}", r"\p{S}"]:
        unmatched = set()
        for _, (start, end) in pre_tokenizers.Split(Regex(pattern), "removed").pre_tokenize_str(text):
            unmatched.update(cps[start:end])
        ranges = []
        for cp in cps:
            if cp in unmatched:
                continue
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
        result[pattern] = ranges
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "make-gpt2":
        make_gpt2(*args)
    elif mode == "make-gpt4":
        make_gpt4(*args)
    elif mode == "variants":
        variants(*args)
    elif mode == "cut-variants":
        cut_variants(*args)
    elif mode == "long-text":
        long_text(*args)
    elif mode == "make-normalized":
        make_normalized(*args)
    elif mode == "texts":
        texts(*args)
    elif mode == "normalization-texts":
        normalization_texts(*args)
    elif mode == "classes":
        classes(*args)
    elif mode in ("encode", "encode-specials-as-text"):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(args[0])
        tok.encode_special_tokens = mode == "encode-specials-as-text"
        encode_with(lambda t: tok.encode(t, add_special_tokens=False).ids,
                    lambda ids: tok.decode(ids, skip_special_tokens=False), args[1], args[2])
    elif mode == "tiktoken-gpt2":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "bench"))
        from tokenize_tiktoken import gpt2_encoding
        enc = gpt2_encoding(args[0])
        encode_with(enc.encode_ordinary, enc.decode, args[1], args[2])
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
