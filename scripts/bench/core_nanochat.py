"""nanochat's own CORE scoring (its nanochat/core_eval.py, imported from a nanochat checkout) on a Hugging Face
folder, for scripts/bench_core.sh: the loop of nanochat's scripts/base_eval.py evaluate_core (shuffle with
random.Random(1337), cut to max_per_task, evaluate_task, centered accuracy), with the model and tokenizer
behind the small interface core_eval.py calls (model(ids) -> logits, model.max_seq_len; tokenizer(prompts,
prepend=bos), get_bos_token_id()), as nanochat's Hugging Face wrapper gave it.

  core_nanochat.py NANOCHAT_DIR HF_DIR BUNDLE MAX_PER_TASK OUT_JSON
Prints the seconds of the scoring alone (model loaded) and writes the per-task results as eval --json does.
"""
import csv
import json
import os
import random
import sys
import time


def main():
    nanochat_dir, hf_dir, bundle, max_per_task, out = sys.argv[1:6]
    max_per_task = int(max_per_task)
    sys.path.insert(0, nanochat_dir)
    import torch
    import yaml
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM
    from nanochat.core_eval import evaluate_task
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    hf = AutoModelForCausalLM.from_pretrained(hf_dir).eval()

    class Model:
        max_seq_len = hf.config.n_positions

        def __call__(self, ids):
            return hf(ids).logits

    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    bos = tok.token_to_id("<|bos|>")
    if bos is None:
        bos = tok.token_to_id("<|endoftext|>")

    class Tok:
        def get_bos_token_id(self):
            return bos

        def __call__(self, texts, prepend=None):
            return [[prepend] + e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

    config = yaml.safe_load(open(os.path.join(bundle, "core.yaml"), encoding="utf-8"))
    baselines = {r["Eval Task"]: float(r["Random baseline"])
                 for r in csv.DictReader(open(os.path.join(bundle, "eval_meta_data.csv"), encoding="utf-8"))}
    results = {}
    start = time.perf_counter()
    for task in config["icl_tasks"]:
        meta = {"task_type": task["icl_task_type"], "dataset_uri": task["dataset_uri"],
                "num_fewshot": task["num_fewshot"][0],
                "continuation_delimiter": task.get("continuation_delimiter", " ")}
        with open(os.path.join(bundle, "eval_data", meta["dataset_uri"]), encoding="utf-8") as f:
            data = [json.loads(line.strip()) for line in f]
        random.Random(1337).shuffle(data)
        if max_per_task > 0:
            data = data[:max_per_task]
        accuracy = evaluate_task(Model(), Tok(), data, "cpu", meta)
        rb = 0.01 * baselines[task["label"]]
        results[task["label"]] = {"type": meta["task_type"], "accuracy": accuracy, "centered": (accuracy - rb) / (1 - rb),
                                  "examples": len(data)}
    seconds = time.perf_counter() - start
    core = sum(r["centered"] for r in results.values()) / len(results)
    json.dump({"core": core, "tasks": results}, open(out, "w"), indent=2)
    print(f"scoring_seconds {seconds:.3f} core {core:.6f}")


if __name__ == "__main__":
    main()
