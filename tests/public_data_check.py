"""No test reads the public data (Tiny Shakespeare, GPT-2's encoder.json and vocab.bpe, gpt-tokenizer's
vectors, HellaSwag) except through the one lookup that skips where it is absent: tests/test_data.h's
test_data_dir() (C++) and tests/lib.sh's test_data_dir (shell). A clone without ../shared and without a
network must pass its tests (issue 64: a BPE trainer test read Tiny Shakespeare from ../shared/data itself,
and failed there).

Two checks:
  1. where the data lives is spelled only in the lookup: no other file under tests/ names ../shared/data,
     the download cache or the MYGPT_SHARED_DATA_DIR macro in code (comments may say where it is); a CTest
     test that passes the folder to a script passes it to one that asks the lookup (a .sh calling
     test_data_dir, or a command that does so itself);
  2. with MYGPT_TEST_DATA pointing at an empty folder (the lookup's first choice), every GoogleTest suite
     of a source that asks the lookup passes or skips: none fails for want of the data.

usage: public_data_check.py TESTS_DIR UNIT_TEST_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

TESTS, UNIT_TESTS = os.path.abspath(sys.argv[1]), sys.argv[2]
# The lookup itself, and the CMake that gives test_data.h its fallback folder.
LOOKUP = {"test_data.h", "lib.sh"}
# Files that name the folder as text about the docs, and read no data: docs_check.py checks that the docs
# quote paths relative to the checkout (../shared/data among its examples).
NAMES_ONLY = {"docs_check.py"}
WHERE = re.compile(r"MYGPT_SHARED_DATA_DIR|shared/data|mygpt-ddp/data")
COMMENT = re.compile(r"^\s*(//|#|\*|/\*)")
ASKS_LOOKUP = re.compile(r"test_data_dir\b|kSharedData\b|tokenizer_training_text\(")
failures = []


def sources():
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d not in ("regressions", "corpus", "__pycache__")]
        for name in files:
            if name.endswith((".cpp", ".h", ".sh", ".py", ".txt", ".cmake")):
                yield os.path.join(root, name)


# --- 1. the location, spelled in the lookup alone -----------------------------------------------------
for path in sources():
    name = os.path.basename(path)
    if name in LOOKUP or name in NAMES_ONLY or name == os.path.basename(__file__):
        continue
    text = open(path, encoding="utf-8", errors="replace").read()
    if name == "CMakeLists.txt":
        # add_test(...) blocks that hand the folder on: to a script that asks the lookup.
        for block in re.findall(r"add_test\((.*?)\)\n", text, re.S):
            if "MYGPT_SHARED_DATA_DIR" not in block or "test_data_dir" in block:
                continue
            scripts = re.findall(r"/([\w./]+\.sh)\"", block)
            script_paths = [os.path.join(os.path.dirname(path), s) for s in scripts]
            if not script_paths or not all(
                    os.path.exists(s) and "test_data_dir" in open(s, encoding="utf-8").read() for s in script_paths):
                test = re.match(r"\s*NAME\s+(\S+)", block)
                failures.append(f"{path}: the test {test.group(1) if test else '?'} is given ../shared/data "
                                "without the lookup (pass it to a script that calls test_data_dir)")
        continue
    for number, line in enumerate(text.splitlines(), 1):
        if WHERE.search(line) and not COMMENT.match(line):
            failures.append(f"{path}:{number}: names where the public data lives instead of asking the lookup "
                            f"(tests/test_data.h test_data_dir(), tests/lib.sh test_data_dir): {line.strip()}")

# --- 2. the suites that read the data, with the data absent -------------------------------------------
suites = set()
for path in sources():
    if path.endswith(".cpp") and os.path.dirname(path) == TESTS:
        text = open(path, encoding="utf-8").read()
        if ASKS_LOOKUP.search(text):
            suites.update(re.findall(r"^TEST(?:_F|_P)?\((\w+),", text, re.M))
if not suites:
    failures.append("no GoogleTest source asks the lookup: the pattern of this check is out of date")
else:
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ, MYGPT_TEST_DATA=empty, OMP_NUM_THREADS="1", GTEST_COLOR="no")
        run = subprocess.run([UNIT_TESTS, "--gtest_filter=" + ":".join(s + ".*" for s in sorted(suites))],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        skipped = re.search(r"\[  SKIPPED \] (\d+) test", run.stdout)
        passed = re.search(r"\[  PASSED  \] (\d+) test", run.stdout)
        if run.returncode != 0:
            failed = [line for line in run.stdout.splitlines() if line.startswith("[  FAILED  ]")]
            failures.append(f"with MYGPT_TEST_DATA={empty} (empty) the suites {', '.join(sorted(suites))} failed "
                            f"(exit {run.returncode}): " + " | ".join(failed[:10]))
            print(run.stdout[-6000:])
        else:
            print(f"the data absent: {len(suites)} suite(s) of the sources that ask the lookup, "
                  f"{passed.group(1) if passed else 0} test(s) passed, "
                  f"{skipped.group(1) if skipped else 0} skipped, none failed")

for failure in failures:
    print("FAIL: " + failure)
print("public data check: " + ("failed" if failures else "passed"))
sys.exit(1 if failures else 0)
