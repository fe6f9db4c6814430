#!/usr/bin/env python3
"""The docs still match the code: every relative link of README.md, docs/**/*.md and the evidence index
(evidence/gpu-runs/README.md) resolves, every `mygpt-ddp` command line in them still parses with today's
options, and none names a path of the machine it was written on.

Usage: docs_check.py MYGPT_DDP REPO

(a) Links: every relative link ([text](path), ![alt](path), [id]: path) names a file or folder that exists,
    and a `file.md#anchor` (or `#anchor`) names a heading of that file by GitHub's slug of it (or an
    <a id/name> anchor).
(b) Command lines: in fenced code blocks (lines joined at a trailing backslash) and in inline code, every
    `mygpt-ddp ...` or `build/mygpt-ddp ...` command, also behind `VAR=value`, mpirun, torchrun, srun, setsid,
    time and other launcher prefixes, goes through `mygpt-ddp --parse-only` (launcher/command_line_check.h):
    an unknown or removed flag, a value of the wrong type or a command that no longer exists fails, with the
    file and line. Placeholders are allowed: a line holding `...` is skipped; `[options]`-like groups are
    dropped and `[--flag N]` unwrapped; a value such as N, GiB, <n> or $STEPS that a typed option refuses is
    retried as a number (or the option's first choice); a bare placeholder (DATA, MODEL) is a positional
    argument, dropped only when the command takes no more of them; `a|b` checks each alternative.

(c) Paths: no line names a development machine's absolute path (/work/..., /root/...): a command is quoted
    relative to the checkout (build/mygpt-ddp, scripts/..., ../shared/data/...), which is how a reader
    runs it.

The run folders under evidence/gpu-runs/ are evidence copied as it came back and are left out. Before the
real docs, a self-test plants a bad flag, a dead link, a dead anchor and a machine's path in a temporary
tree: the check fails unless it reports exactly those. Needs no data and no packages; the binary loads once per round (seconds).
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unicodedata
import urllib.parse

# ---------------------------------------------------------------------------------------------------
# Markdown: fenced blocks, inline code spans, headings and their GitHub slugs

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def split_blocks(lines):
    """(fenced, [(line_no, text), ...]) runs: fenced code blocks and the text between them."""
    blocks, current, fence = [], [], None
    for number, line in enumerate(lines, 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            if current:
                blocks.append((False, current))
            current, fence = [], opening.group(1)
            continue
        if fence is not None and re.match(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", line):
            blocks.append((True, current))
            current, fence = [], None
            continue
        current.append((number, line))
    if current:
        blocks.append((fence is not None, current))
    return blocks


def code_spans(text):
    """(start, end, content) of each inline code span of `text` (CommonMark's backtick-run rule)."""
    spans, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] != "`":
            i += 1
            continue
        run = len(text[i:]) - len(text[i:].lstrip("`"))
        close = re.compile(r"(?<!`)" + "`" * run + r"(?!`)")
        found = close.search(text, i + run)
        if found is None:
            i += run
            continue
        content = text[i + run:found.start()].replace("\n", " ")
        if len(content) > 2 and content.startswith(" ") and content.endswith(" ") and content.strip():
            content = content[1:-1]
        spans.append((i, found.end(), content))
        i = found.end()
    return spans


def paragraphs(block):
    """Runs of non-blank lines of a text block, as (joined text, [line number of each character offset])."""
    runs, current = [], []
    for number, line in block + [(None, "")]:
        table_row = line.lstrip().startswith("|")  # a table's cells end at their row
        if line.strip() and not table_row:
            current.append((number, line))
            continue
        if table_row:
            runs.append((line, [number] * (len(line) + 1)))
        if current:
            text = "\n".join(l for _, l in current)
            starts = []
            for n, l in current:
                starts.extend([n] * (len(l) + 1))
            runs.append((text, starts))
        current = []
    return runs


def inline_text(markdown):
    """A heading's text as rendered: code spans' content, links' text, no emphasis markers or tags."""
    out, last = [], 0
    for start, end, content in code_spans(markdown):
        out.append(plain_inline(markdown[last:start]))
        out.append(content)
        last = end
    out.append(plain_inline(markdown[last:]))
    return "".join(out)


def plain_inline(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"\\(.)", r"\1", text)
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)
    return text


def github_slug(heading_text):
    """GitHub's anchor of a heading (github-slugger): lower case; letters, marks, digits, '_' and '-' kept,
    every other character dropped; each space a '-'."""
    kept = []
    for ch in inline_text(heading_text).strip().lower():
        category = unicodedata.category(ch)
        if ch == " ":
            kept.append("-")
        elif ch == "-" or category[0] in "LMN" or category == "Pc":
            kept.append(ch)
    return "".join(kept)


def anchors_of(lines):
    """Every anchor of a markdown file: headings' slugs (repeats get -1, -2, ... as on GitHub) and ids."""
    anchors, seen = set(), {}
    for fenced, block in split_blocks(lines):
        if fenced:
            continue
        for index, (number, line) in enumerate(block):
            heading = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            underline = index + 1 < len(block) and re.match(r"^ {0,3}(=+|-+)\s*$", block[index + 1][1])
            text = heading.group(1) if heading else line if underline and line.strip() and not line.lstrip().startswith("|") else None
            if text is not None:
                slug = github_slug(text)
                count = seen.get(slug, 0)
                seen[slug] = count + 1
                anchors.add(slug if count == 0 else f"{slug}-{count}")
            for found in re.finditer(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
                anchors.add(found.group(1))
    return anchors


# ---------------------------------------------------------------------------------------------------
# (a) links

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")


def link_problems(root, path, lines, anchor_cache):
    problems = []
    for fenced, block in split_blocks(lines):
        if fenced:
            continue
        for text, starts in paragraphs(block):
            blanked = list(text)
            for start, end, _ in code_spans(text):
                blanked[start:end] = " " * (end - start)
            blanked = "".join(blanked)
            targets = [(m.start(), m.group(1)) for m in LINK.finditer(blanked)]
            offset = 0
            for line in blanked.split("\n"):
                reference = REFERENCE.match(line)
                if reference:
                    targets.append((offset, reference.group(1)))
                offset += len(line) + 1
            for at, target in targets:
                problem = link_problem(root, path, target.strip("<>"), anchor_cache)
                if problem:
                    problems.append((path, starts[at], problem))
    return problems


def link_problem(root, path, target, anchor_cache):
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
        return None  # a URL (https:, mailto:, ...)
    file_part, _, anchor = target.partition("#")
    file_part = urllib.parse.unquote(file_part)
    base = root if file_part.startswith("/") else os.path.dirname(path)  # GitHub: "/" is the repository's root
    resolved = os.path.normpath(os.path.join(base, file_part.lstrip("/"))) if file_part else path
    if not os.path.exists(resolved):
        return f"link to {target}: {os.path.relpath(resolved, root)} does not exist"
    if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
        if resolved not in anchor_cache:
            with open(resolved, encoding="utf-8") as f:
                anchor_cache[resolved] = anchors_of(f.read().split("\n"))
        if urllib.parse.unquote(anchor) not in anchor_cache[resolved]:
            return f"link to {target}: {os.path.relpath(resolved, root)} has no heading whose anchor is #{anchor}"
    return None


# ---------------------------------------------------------------------------------------------------
# (b) command lines

PREFIXES = {"mpirun", "mpiexec", "torchrun", "srun", "setsid", "time", "nice", "taskset", "env", "timeout",
            "nohup", "numactl", "stdbuf", "chrt", "exec", "sudo", "compute-sanitizer", "valgrind"}
SEPARATORS = {"|", "||", "&&", ";", "&"}
REDIRECT = re.compile(r"^(\d*|&)(>>?|<)(&\d+)?")
PLACEHOLDER = re.compile(r"^(<[^>]+>|\{[^}]+\}|\$\{?\w+\}?|\$\(.*\)|[A-Z][A-Za-z0-9_]*)$")


def command_texts(lines):
    """(line number, text) of every fenced line (backslash continuations joined) and every inline code span
    that mentions mygpt-ddp."""
    found = []
    for fenced, block in split_blocks(lines):
        if fenced:
            pending, first = "", None
            for number, line in block:
                stripped = re.sub(r"^\s*\$ ", "", line) if not pending else line
                first = first if pending else number
                if stripped.rstrip().endswith("\\"):
                    pending += stripped.rstrip()[:-1] + " "
                    continue
                text, pending = pending + stripped, ""
                if "mygpt-ddp" in text:
                    found.append((first, text, True))
            if pending and "mygpt-ddp" in pending:
                found.append((first, pending, True))
            continue
        for text, starts in paragraphs(block):
            for start, _, content in code_spans(text):
                if "mygpt-ddp" in content:
                    found.append((starts[start], content, False))
    return found


def mygpt_commands(text, in_code_block):
    """The argument lists of the mygpt-ddp commands that `text` runs (several when it chains commands)."""
    if "..." in text or "\u2026" in text:
        return []
    try:
        words = shlex.split(text, comments=in_code_block, posix=True)
    except ValueError:
        return [None]  # unbalanced quotes: the line cannot be run as written
    commands, simple = [], []
    for word in words + [";"]:
        if word in SEPARATORS or word.endswith(";"):
            if word.endswith(";") and word != ";":
                simple.append(word[:-1])
            commands.append(simple)
            simple = []
        else:
            simple.append(word)
    found = []
    for simple in commands:
        words = drop_redirections(simple)
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if not words:
            continue
        if os.path.basename(words[0]) == "mygpt-ddp":
            found.append(words[1:])
        elif os.path.basename(words[0]) in PREFIXES:
            for i, word in enumerate(words[1:], 1):
                name = os.path.basename(word)
                if name == "mygpt-ddp":
                    found.append(words[i + 1:])
                    break
                if name.endswith((".py", ".sh")) or re.match(r"^(python[0-9.]*|bash|sh)$", name):
                    break
    return found


def drop_redirections(words):
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        operator = REDIRECT.match(word) if not re.match(r"^<[^<>]+>$", word) else None  # <n>: a placeholder
        if operator:
            skip = operator.end() == len(word) and not operator.group(3)
            continue
        kept.append(word)
    return kept


def placeholder_free(args):
    """args with `[options]`-like groups dropped and `[--flag VALUE]` unwrapped; None when the command word
    itself is a placeholder (`<command>`)."""
    out, group = [], None
    for word in args:
        if group is None and word.startswith("[") and not word.startswith("[["):
            group = []
            word = word[1:]
        if group is None:
            out.append(word)
            continue
        closes = word.endswith("]")
        group.append(word[:-1] if closes else word)
        if closes:
            kept = [w for w in group if w]
            if kept and (kept[0].startswith("-") or all(PLACEHOLDER.match(w) for w in kept)):
                out.extend(kept)
            group = None
    if group:
        out.extend(group)
    if out and not re.match(r"^(-{0,2}[a-z][a-z-]*)$", out[0]):
        return None
    return out


def alternatives(args):
    """One argument list per alternative of `a|b` words (each alternative checked at least once)."""
    width = max([len(w.split("|")) for w in args if "|" in w.strip("|")] + [1])
    return [[w.split("|")[min(k, len(w.split("|")) - 1)] if "|" in w.strip("|") else w for w in args]
            for k in range(width)]


def retried(args, error):
    """args with the placeholder the error names replaced (a value) or dropped (a bare argument); None when
    the error is not about a placeholder."""
    value = re.search(r"\('([^']*)'\) for option|got '([^']*)'", error)
    if value:
        word = value.group(1) if value.group(1) is not None else value.group(2)
        if PLACEHOLDER.match(word) and word in args:
            choice = re.search(r"must be ([A-Za-z0-9_.-]+)(?:,| or )", error)
            replacement = choice.group(1) if choice and "integer" not in error and "number" not in error else "1"
            i = args.index(word)
            return args[:i] + [replacement] + args[i + 1:]
        return None
    if "too many positional options" in error or "unexpected argument '" in error:
        bare = [i for i, w in enumerate(args) if PLACEHOLDER.match(w) and i > 1 and not args[i - 1].startswith("-")]
        if bare:
            return args[:bare[-1]] + args[bare[-1] + 1:]
    return None


def parse_results(binary, lines_of_words):
    """`mygpt-ddp --parse-only` over every argument list at once: one "ok" or "error: ..." each."""
    if not lines_of_words:
        return []
    stdin = "".join("\t".join(w.replace("\t", " ") for w in words) + "\n" for words in lines_of_words)
    done = subprocess.run([binary, "--parse-only"], input=stdin, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    results = done.stdout.split("\n")[:len(lines_of_words)]
    if done.returncode not in (0, 2) or len(results) != len(lines_of_words):
        sys.exit(f"docs_check: {binary} --parse-only failed (exit {done.returncode}): {done.stderr.strip()}")
    return results


def command_problems(binary, path, lines):
    pending = []  # (line, text, argument list, retries left)
    problems = []
    for number, text, in_code_block in command_texts(lines):
        for args in mygpt_commands(text, in_code_block):
            if args is None:
                problems.append((path, number, f"`{text.strip()}`: unbalanced quotes"))
                continue
            clean = placeholder_free(args)
            if not clean:
                continue  # `mygpt-ddp` alone names the program; `mygpt-ddp <command>` is a placeholder
            for variant in alternatives(clean):
                pending.append((number, text, variant, 4))
    checked = len(pending)
    while pending:
        results = parse_results(binary, [args for _, _, args, _ in pending])
        again = []
        for (number, text, args, left), result in zip(pending, results):
            if result == "ok":
                continue
            error = result[len("error: "):]
            retry = retried(args, error) if left > 0 else None
            if retry is not None:
                again.append((number, text, retry, left - 1))
            else:
                problems.append((path, number, f"`{' '.join(text.split())}`: {error}"))
        pending = again
    return problems, checked


# ---------------------------------------------------------------------------------------------------


def markdown_files(root):
    """README.md, docs/**/*.md and the evidence index; not the run folders (evidence, as it came back)."""
    files = [os.path.join(root, "README.md")] if os.path.isfile(os.path.join(root, "README.md")) else []
    for folder, dirs, names in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    index = os.path.join(root, "evidence", "gpu-runs", "README.md")
    return files + ([index] if os.path.isfile(index) else [])


# A development machine's absolute paths: its checkouts, shared data and home (not /usr, /tmp or /opt,
# which a reader's machine has too).
MACHINE_PATH = re.compile(r"(?<![\w.~$}-])/(?:work|root)/")


def machine_path_problems(path, lines):
    return [(path, number, f"names a development machine's path ({line[m.start():].split()[0].strip('`();,.')}): "
             "quote it relative to the checkout")
            for number, line in enumerate(lines, 1) for m in [MACHINE_PATH.search(line)] if m]


def check_tree(binary, root):
    problems, commands, anchor_cache = [], 0, {}
    for path in markdown_files(root):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        problems += link_problems(root, path, lines, anchor_cache)
        problems += machine_path_problems(path, lines)
        found, checked = command_problems(binary, path, lines)
        problems += found
        commands += checked
    return sorted(problems), commands


SELF_TEST_README = """# Planted

See [the page](docs/page.md), [its section](docs/page.md#usage-mygpt-ddp-train-2026-11-28-1200-utc),
a [dead link](docs/missing.md) and a [dead anchor](docs/page.md#no-such-heading), [here](#planted).

```bash
OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none build/mygpt-ddp train DATA_DIR --steps 10 \\
  --batch-size N --precision P [options] 2>&1 | tee log
build/mygpt-ddp train DATA --no-such-flag 3
```

Also `mygpt-ddp generate --checkpoint DIR --max-new-tokens N`, `mygpt-ddp <command> --help`,
`mygpt-ddp train ... --whatever`, `torchrun --nproc_per_node 2 --no-python build/mygpt-ddp train --zero 0|7`.
Measured with `scripts/bench_load.sh --baseline /work/main/build/mygpt-ddp`; data in ../shared/data, /tmp/x.
"""

SELF_TEST_PAGE = """# Usage: `mygpt-ddp train`, 2026-11-28 12:00 UTC

Back to [the front](../README.md).
"""


def self_test(binary):
    """The check finds a planted bad flag, bad value, dead link and dead anchor, and nothing else."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "README.md"), "w", encoding="utf-8") as f:
            f.write(SELF_TEST_README)
        with open(os.path.join(root, "docs", "page.md"), "w", encoding="utf-8") as f:
            f.write(SELF_TEST_PAGE)
        problems, commands = check_tree(binary, root)
        expected = [(4, "missing.md"), (4, "no-such-heading"), (9, "no-such-flag"), (13, "got 7"),
                    (14, "/work/main/build/mygpt-ddp")]
        found = sorted((n, next((k for line, k in expected if line == n and k in m), m))
                       for p, n, m in problems if os.path.relpath(p, root) == "README.md")
        if found != sorted(expected) or len(problems) != len(expected) or commands < 6:
            print("docs_check: the self-test on planted mistakes failed; reported:", file=sys.stderr)
            for p, n, m in problems:
                print(f"  {os.path.relpath(p, root)}:{n}: {m}", file=sys.stderr)
            print(f"  expected (README.md line, what): {expected}, at least 6 command lines "
                  f"(checked {commands})", file=sys.stderr)
            sys.exit(1)
        print(f"docs_check: self-test passed (a planted bad flag, bad value, dead link, dead anchor and machine path found; "
              f"{commands} command lines checked)")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    self_test(binary)
    problems, commands = check_tree(binary, root)
    files = len(markdown_files(root))
    for path, number, message in problems:
        print(f"{os.path.relpath(path, root)}:{number}: {message}")
    if problems:
        print(f"docs_check: {len(problems)} problem(s) in README.md, docs/ and evidence/ ({files} files, {commands} command lines)")
        sys.exit(1)
    print(f"docs_check: {files} files, every relative link resolves, all {commands} mygpt-ddp command lines parse, "
          "and no line names a development machine's path")


if __name__ == "__main__":
    main()
