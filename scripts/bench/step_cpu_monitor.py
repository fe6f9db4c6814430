#!/usr/bin/env python3
"""Runs a training command and measures the CPU time its whole process tree spends on a window of
steps, for benchmarks on machines that other jobs share (there, wall-clock step times mostly measure
the other jobs; CPU time measures the work, including any busy-waiting of the ranks).

  step_cpu_monitor.py --from-step 1 --to-step 5 -- COMMAND...

The command's output passes through unchanged. The window opens when the line `step <from>` appears
(printed after that step ends) and closes at the line `step <to>`, so it covers steps from+1..to.
At each end the user + system time of every live process descended from the command (mpirun's or
torchrun's ranks included) is summed from /proc. The last line of output is machine-readable:
  CPU_WINDOW {"steps": ..., "cpu_s": ..., "wall_s": ..., "cpu_s_per_step": ..., "processes": ...}
Exits with the command's status.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def process_table():
    """pid -> (ppid, utime + stime in seconds) for every process we can read."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS)
    return table


def tree_cpu(root):
    table = process_table()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, count, stack = 0.0, 0, [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            total += table[pid][1]
            count += 1
        stack.extend(children.get(pid, []))
    return total, count


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--from-step", type=int, required=True)
    p.add_argument("--to-step", type=int, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.to_step <= args.from_step:
        p.error("give a command after --, and --to-step > --from-step")

    step_line = re.compile(r"^step\s+(\d+)\s+\|")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    marks = {}
    for line in proc.stdout:
        m = step_line.match(line)
        if m and int(m.group(1)) in (args.from_step, args.to_step) and int(m.group(1)) not in marks:
            cpu, count = tree_cpu(proc.pid)
            marks[int(m.group(1))] = (time.perf_counter(), cpu, count)
        sys.stdout.write(line)
        sys.stdout.flush()
    status = proc.wait()
    if args.from_step in marks and args.to_step in marks:
        (w0, c0, _), (w1, c1, n) = marks[args.from_step], marks[args.to_step]
        steps = args.to_step - args.from_step
        print("CPU_WINDOW " + json.dumps({"steps": steps, "cpu_s": c1 - c0, "wall_s": w1 - w0,
                                          "cpu_s_per_step": (c1 - c0) / steps, "processes": n}), flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
