"""CORE and bits per byte as issue 56 describes nanochat's scoring, written from that description alone, for
tests/core_end_to_end.sh to hold `mygpt-ddp eval` against (transformers runs the exported model).

  bundle OUT_DIR [--nanochat-safe]  a small bundle of every task type (both delimiters, a crop at a short block,
                                 a task smaller than its shots, Unicode) and its text, OUT_DIR/text.txt
  sort_bundle OUT_DIR N          the sorting task (builtin:sort's lines) posed as multiple choice: N items,
                                 the sorted digits among three unsorted permutations of them
  bad_bundles OUT_DIR            broken copies of a bundle, one folder per fault (names say which)
  score HF_DIR BUNDLE MAX OUT    per-task accuracies of the Hugging Face folder (transformers + tokenizers)
  bpb HF_DIR TEXT B T STEPS      bits per byte of eval --val's batches of TEXT (--val-fraction 1), by summing
                                 per-token nats and token bytes here
"""
import json
import math
import os
import random
import sys

TYPES = ("multiple_choice", "schema", "language_modeling")


def write_bundle(out, tasks):
    """tasks: (label, type, shots, delimiter or None, random baseline %, items)."""
    os.makedirs(os.path.join(out, "eval_data", "synthetic"), exist_ok=True)
    yaml = ["# a synthetic CORE bundle (tests/core_reference.py)", "icl_tasks:"]
    csv = ['Eval Task,Task Category,Random baseline,Description']
    for label, kind, shots, delimiter, baseline, items in tasks:
        uri = f"synthetic/{label}.jsonl"
        yaml += [f"- label: {label}", f"  dataset_uri: {uri}", f"  num_fewshot: [{shots}, 99]",
                 f"  icl_task_type: {kind}"]
        if delimiter is not None:
            yaml.append(f"  continuation_delimiter: {json.dumps(delimiter)}")
        csv.append(f'{label},synthetic,{baseline},"made up, for tests ""only"""')
        with open(os.path.join(out, "eval_data", uri), "w", encoding="utf-8") as f:
            for item in items:
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "core.yaml"), "w", encoding="utf-8") as f:
        f.write("\n".join(yaml) + "\n")
    with open(os.path.join(out, "eval_meta_data.csv"), "w", encoding="utf-8") as f:
        f.write("\n".join(csv) + "\n")


WORDS = ["apple", "river", "stone", "café", "naïve", "Straße", "東京", "night", "light", "green", "über", "fox",
         "quiet", "moon", "ocean", "smile 🙂", "bread", "winter", "garden", "Ελλάδα"]


def synthetic_tasks():
    rng = random.Random(56)
    word = lambda: rng.choice(WORDS)
    mc = [{"query": f"Which word follows {word()} and {word()}?", "choices": [word() for _ in range(4)],
           "gold": rng.randrange(4)} for _ in range(16)]
    mc_answer = [{"query": f"Name the {word()} of the {word()}.", "choices": [f"the {word()}", f"a {word()}", word()],
                  "gold": rng.randrange(3)} for _ in range(12)]
    schema = [{"context_options": [f"The {word()} met the {word()}", f"A {word()} saw {word()}"],
               "continuation": f"and then the {word()} left.", "gold": rng.randrange(2)} for _ in range(12)]
    lm = [{"context": f"{word()} {word()} is  ", "continuation": f"{word()}"} for _ in range(12)]
    lm += [{"context": f"  the {word()}\t", "continuation": f"{word()} {word()}"} for _ in range(2)]
    tiny = [{"query": f"Pick {word()}:", "choices": [word(), word()], "gold": i % 2} for i in range(3)]
    long = [{"query": " ".join(word() for _ in range(40)) + " ?", "choices": [word(), word(), word()],
             "gold": rng.randrange(3)} for _ in range(8)]
    return [("mc_space", "multiple_choice", 3, None, 25.0, mc),
            ("mc_answer", "multiple_choice", 2, "\nAnswer: ", 33.3, mc_answer),
            ("schema_pair", "schema", 1, " ", 50.0, schema),
            ("lm_words", "language_modeling", 2, " ", 0.0, lm),
            ("tiny_task", "multiple_choice", 5, None, 50.0, tiny),
            ("long_query", "multiple_choice", 0, None, 33.3, long)]


def bundle(out, nanochat_safe=False):
    tasks = synthetic_tasks()
    if nanochat_safe:  # nanochat's code fails on a task with fewer other items than its shots
        tasks = [t for t in tasks if t[0] != "tiny_task"]
    write_bundle(out, tasks)
    with open(os.path.join(out, "text.txt"), "w", encoding="utf-8") as f:
        for _ in range(30):
            for *_, items in tasks:
                for item in items:
                    f.write(" ".join(str(v) for v in item.values()) + "\n")


def sort_bundle(out, n):
    rng = random.Random(7)
    items = []
    for _ in range(int(n)):
        digits = "".join(rng.choice("0123456789") for _ in range(6))
        right = "".join(sorted(digits))
        wrong = set()
        while len(wrong) < 3:
            s = "".join(rng.sample(digits, len(digits)))
            if s != right:
                wrong.add(s)
        choices = sorted(wrong) + [right]
        rng.shuffle(choices)
        items.append({"query": digits, "choices": choices, "gold": choices.index(right)})
    write_bundle(out, [("sort_mc", "multiple_choice", 2, "=", 25.0, items)])


def bad_bundles(out):
    import shutil
    good = os.path.join(out, "good")
    write_bundle(good, [("t", "multiple_choice", 1, None, 25.0,
                         [{"query": "q", "choices": ["a", "b"], "gold": 0}, {"query": "r", "choices": ["c", "d"], "gold": 1}])])
    def variant(name, change):
        path = os.path.join(out, name)
        shutil.copytree(good, path)
        change(path)
    data = lambda p: os.path.join(p, "eval_data", "synthetic", "t.jsonl")
    def write(path, text, mode="w"):
        with open(path, mode) as f:
            f.write(text)
    variant("no_yaml", lambda p: os.remove(os.path.join(p, "core.yaml")))
    variant("no_csv", lambda p: os.remove(os.path.join(p, "eval_meta_data.csv")))
    variant("no_data", lambda p: os.remove(data(p)))
    variant("bad_yaml", lambda p: write(os.path.join(p, "core.yaml"), "icl_tasks:\n- label: [unclosed\n"))
    variant("unknown_type", lambda p: write(os.path.join(p, "core.yaml"), open(os.path.join(good, "core.yaml")).read()
                                            .replace("multiple_choice", "ranking")))
    variant("absent_from_csv", lambda p: write(os.path.join(p, "eval_meta_data.csv"), "Eval Task,Random baseline\nother,25\n"))
    variant("gold_out_of_range", lambda p: write(data(p), '{"query": "s", "choices": ["e", "f"], "gold": 2}\n', "a"))
    variant("empty_choices", lambda p: write(data(p), '{"query": "s", "choices": [], "gold": 0}\n', "a"))
    variant("not_utf8", lambda p: write(data(p), b'{"query": "caf\xe9", "choices": ["e", "f"], "gold": 0}\n', "ab"))


# --- scoring, from the description ------------------------------------------------------------
def py_strip(s):
    return s.strip()


def prompts_of(kind, delimiter, item, shots):
    if kind == "multiple_choice":
        head = "".join(f"{e['query']}{delimiter}{e['choices'][e['gold']]}\n\n" for e in shots)
        return [head + item["query"] + delimiter + c for c in item["choices"]]
    if kind == "schema":
        head = "".join(f"{e['context_options'][e['gold']]}{delimiter}{e['continuation']}\n\n" for e in shots)
        return [head + o + delimiter + item["continuation"] for o in item["context_options"]]
    head = "".join(f"{py_strip(e['context'])}{delimiter}{e['continuation']}\n\n" for e in shots)
    without = head + py_strip(item["context"]) + delimiter
    return [py_strip(without), without + item["continuation"]]


def common_length(rows, reverse):
    n = min(len(r) for r in rows)
    for i in range(n):
        at = -1 - i if reverse else i
        if any(r[at] != rows[0][at] for r in rows):
            return i
    return n


def rows_of(kind, prompts, encode, bos):
    rows = [[bos] + encode(p) for p in prompts]
    if kind == "multiple_choice":
        start = common_length(rows, False)
        return [(r, start, len(r)) for r in rows]
    if kind == "schema":
        suffix = common_length(rows, True)
        return [(r, len(r) - suffix, len(r)) for r in rows]
    without, with_ = rows
    assert len(without) < len(with_) and with_[:len(without)] == without
    return [(with_, len(without), len(with_))]


def score(hf_dir, bundle_dir, max_per_task, out):
    import torch
    import yaml
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    block = model.config.n_positions
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    bos = None
    config_path = os.path.join(hf_dir, "tokenizer_config.json")
    if os.path.exists(config_path):
        config = json.load(open(config_path))
        for key in ("bos_token", "eos_token"):
            value = config.get(key)
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str) and tok.token_to_id(value) is not None:
                bos = tok.token_to_id(value)
                break
    for name in ("<|endoftext|>", "<|bos|>"):
        if bos is None:
            bos = tok.token_to_id(name)
    encode = lambda text: tok.encode(text, add_special_tokens=False).ids
    config = yaml.safe_load(open(os.path.join(bundle_dir, "core.yaml"), encoding="utf-8"))
    import csv
    baselines = {row["Eval Task"]: float(row["Random baseline"])
                 for row in csv.DictReader(open(os.path.join(bundle_dir, "eval_meta_data.csv"), encoding="utf-8"))}
    results = {}
    for task in config["icl_tasks"]:
        kind, shots = task["icl_task_type"], task["num_fewshot"][0]
        delimiter = task.get("continuation_delimiter", " ")
        with open(os.path.join(bundle_dir, "eval_data", task["dataset_uri"]), encoding="utf-8") as f:
            data = [json.loads(line) for line in f if line.strip()]
        random.Random(1337).shuffle(data)
        if max_per_task > 0:
            data = data[:max_per_task]
        right = 0
        for i, item in enumerate(data):
            others = [j for j in range(len(data)) if j != i]
            picked = random.Random(1234 + i).sample(others, min(shots, len(others))) if shots > 0 else []
            rows = rows_of(kind, prompts_of(kind, delimiter, item, [data[j] for j in picked]), encode, bos)
            cropped = []
            for r, s, e in rows:
                drop = max(0, len(r) - block)
                cropped.append((r[drop:], max(s - drop, 1), e - drop))
            width = max(len(r) for r, _, _ in cropped)
            ids = torch.tensor([r + [bos] * (width - len(r)) for r, _, _ in cropped])
            with torch.no_grad():
                logits = model(ids).logits.float()
            losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
            if kind == "language_modeling":
                r, s, e = cropped[0]
                ok = bool((logits[0, s - 1:e - 1].argmax(-1) == ids[0, s:e]).all())
            else:
                means = [losses[k, s - 1:e - 1].mean().item() for k, (_, s, e) in enumerate(cropped)]
                ok = means.index(min(means)) == item["gold"]
            right += ok
        accuracy = right / len(data)
        rb = 0.01 * baselines[task["label"]]
        results[task["label"]] = {"type": kind, "accuracy": accuracy, "centered": (accuracy - rb) / (1 - rb),
                                  "examples": len(data)}
    core = sum(r["centered"] for r in results.values()) / len(results)
    json.dump({"core": core, "tasks": results}, open(out, "w"), indent=2)
    print(f"CORE {core:.4f}: " + ", ".join(f"{k} {v['accuracy']:.4f}" for k, v in results.items()))


def bpb(hf_dir, text_path, batch, seq, steps):
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    ids = tok.encode(open(text_path, encoding="utf-8").read(), add_special_tokens=False).ids
    special = {t.id for t in []}
    data = json.load(open(os.path.join(hf_dir, "tokenizer.json"), encoding="utf-8"))
    special = {t["id"] for t in data.get("added_tokens", []) if t.get("special")}
    byte_decoder = {c: b for b, c in bytes_to_unicode().items()}
    vocab = {i: s for s, i in tok.get_vocab(with_added_tokens=True).items()}
    def token_bytes(i):
        if i in special:
            return 0
        s = vocab[i]
        return len(bytes(byte_decoder[c] for c in s)) if all(c in byte_decoder for c in s) else len(s.encode())
    nats, count = 0.0, 0
    chunk = batch * seq
    for b in range(steps):
        window = torch.tensor(ids[b * chunk: b * chunk + chunk + 1])
        x, y = window[:-1].view(batch, seq), window[1:].view(batch, seq)
        with torch.no_grad():
            logits = model(x).logits.float()
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none").flatten()
        for loss, target in zip(losses.tolist(), y.flatten().tolist()):
            n = token_bytes(target)
            if n > 0:
                nats += loss
                count += n
    print(f"bpb {nats / (math.log(2) * count):.6f} nats {nats:.4f} bytes {count}")


def bytes_to_unicode():
    # GPT-2's byte alphabet: printable bytes are themselves, the rest shifted above 255.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "bundle":
        bundle(args[0], nanochat_safe="--nanochat-safe" in args[1:])
    elif command == "sort_bundle":
        sort_bundle(args[0], args[1])
    elif command == "bad_bundles":
        bad_bundles(args[0])
    elif command == "score":
        score(args[0], args[1], int(args[2]), args[3])
    elif command == "bpb":
        bpb(args[0], args[1], int(args[2]), int(args[3]), int(args[4]))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
