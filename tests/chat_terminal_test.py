"""`mygpt-ddp chat` on a terminal, as a user at a keyboard drives it: a pseudo-terminal (Python's pty, on
Linux and macOS alike) gives the command a terminal for stdin, and the keys go through the terminal's
line discipline, so Ctrl-C is a real SIGINT and Ctrl-D a real end of input.

Checks: the prompt comes; a message gets an "Assistant:" reply streamed; Ctrl-C during a long reply
stops it with "(stopped)" and the prompt comes back (the process lives on); "clear" starts a new
conversation; Ctrl-D at the prompt ends the command with exit status 0.

Usage: chat_terminal_test.py MYGPT_DDP CHECKPOINT   (a model whose vocabulary has room for the chat
tokens, with a long context, so that an untrained model's reply is still running when Ctrl-C comes)
"""
import os
import pty
import select
import sys
import time


def main():
    binary, checkpoint = sys.argv[1], sys.argv[2]
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
        os.execv(binary, [binary, "chat", "--checkpoint", checkpoint, "--device", "cpu", "--threads", "1",
                          "--max-new-tokens", "100000", "--temperature", "1", "--top-k", "0"])
    seen = b""

    def read_until(marker, seconds):
        nonlocal seen
        deadline = time.time() + seconds
        while marker not in seen:
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError(f"no {marker!r} within {seconds} s; the terminal shows:\n{seen.decode(errors='replace')}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child is gone (EIO)
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the command ended before {marker!r}:\n{seen.decode(errors='replace')}")
                seen += chunk
        found = seen.index(marker) + len(marker)
        before, seen = seen[:found], seen[found:]
        return before

    failures, passes = [], []

    def check(label, condition):
        print(("PASS: " if condition else "FAIL: ") + label)
        (passes if condition else failures).append(label)

    read_until(b"User: ", 120)
    check("the prompt comes", True)
    os.write(fd, b"hello, who are you?\n")
    read_until(b"Assistant: ", 60)
    time.sleep(0.5)  # some of the reply is streamed
    os.write(fd, b"\x03")  # Ctrl-C, through the line discipline: SIGINT
    stopped = read_until(b"User: ", 60)
    check("Ctrl-C stops the reply, says so and prompts again", b"(stopped)" in stopped)
    check("... and some of the reply was streamed before it", len(stopped.split(b"(stopped)")[0].strip()) > 0)
    # A message that fits in no conversation (about 1500 tokens for a context of 1024): said once, before
    # any reply label, and the conversation goes on (it was thrown away, and two labels printed).
    os.write(fd, b"a " * 1500 + b"\n")
    too_long = read_until(b"User: ", 60)
    check("a message too long for any conversation: one line, no reply label, the conversation kept",
          b"does not fit even in a new conversation" in too_long and b"Assistant:" not in too_long
          and b"a new conversation starts" not in too_long)
    os.write(fd, b"clear\n")
    cleared = read_until(b"User: ", 60)
    check("'clear' starts a new conversation", b"(a new conversation)" in cleared)
    os.write(fd, b"\x04")  # Ctrl-D at an empty line: end of input
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    check(f"Ctrl-D ends the command with exit status 0 (got {code})", code == 0)
    print(f"{len(passes)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
