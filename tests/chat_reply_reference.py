"""transformers' greedy reply on a folder that `export` wrote of a chat model, against `chat`'s (tests/sft_end_to_end.sh).

usage: chat_reply_reference.py FOLDER SYSTEM MAX_NEW_TOKENS PROMPTS_FILE OUR_REPLIES_FILE
Each prompt line is a conversation of one user message after SYSTEM. transformers renders it with the
folder's chat template (apply_chat_template, generation prompt added), generates greedily with its KV
cache until <|assistant_end|> or MAX_NEW_TOKENS, and decodes the new tokens; each must equal our reply line
(chat's non-interactive output: one line a reply, \\n, \\r and \\\\ escaped). Prints a line per prompt and
exits 1 on any difference.
"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402


def unescape(line):
    out, i = [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            out.append({"n": "\n", "r": "\r", "\\": "\\"}.get(line[i + 1], line[i + 1]))
            i += 2
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def main():
    folder, system, max_new, prompts_file, ours_file = sys.argv[1:6]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    end = tokenizer.convert_tokens_to_ids("<|assistant_end|>")
    with open(prompts_file, encoding="utf-8") as f:
        prompts = f.read().splitlines()
    with open(ours_file, encoding="utf-8") as f:
        ours = [unescape(line) for line in f.read().splitlines()]
    if len(ours) != len(prompts):
        print(f"FAIL: {len(prompts)} prompts but {len(ours)} reply lines from chat")
        return 1
    failed = 0
    for prompt, our_reply in zip(prompts, ours):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        prompt_ids = torch.tensor([list(ids)])
        with torch.no_grad():
            out = model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), do_sample=False,
                                 max_new_tokens=int(max_new), eos_token_id=end, pad_token_id=end)
        new = out[0, prompt_ids.shape[1]:].tolist()
        if new and new[-1] == end:
            new = new[:-1]
        theirs = tokenizer.decode(new, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        same = theirs == our_reply
        failed += not same
        print(f"{'same' if same else 'DIFFERENT'}: {prompt!r}: transformers {theirs!r} ({len(new)} tokens), chat {our_reply!r}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
