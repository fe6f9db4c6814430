"""transformers' apply_chat_template on a tokenizer folder that `export` wrote (tests/test_chat_format.cpp).

usage: chat_template_reference.py FOLDER CASES_JSON
CASES_JSON: a list of {"messages": [...], "add_generation_prompt": bool}. Prints, as the last line, the
JSON list of the ids each case renders to.
"""
import json
import sys

from transformers import AutoTokenizer


def main():
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
    cases = json.loads(sys.argv[2])
    out = []
    for case in cases:
        ids = tokenizer.apply_chat_template(case["messages"], add_generation_prompt=case["add_generation_prompt"],
                                            tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        out.append([int(i) for i in ids])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
