#!/usr/bin/env python3
"""Runs one rank of a training job and measures that rank alone: its peak resident set over the whole run,
its peak over a window of steps, and the CPU time it spent in that window (scripts/bench_zero_stages.sh
starts every rank through it under mpirun; a shared machine makes wall-clock step times meaningless).

  rank_peak_probe.py --watch RANK0_STDOUT --from-step 0 --to-step 3 --report DIR -- COMMAND...

The window opens when the line `step <from> |` appears in RANK0_STDOUT (rank 0 alone prints progress; the
ranks advance together, held by their collectives) and closes at `step <to> |`, so it covers steps
from+1..to. When it opens, the rank's peak so far is read (VmHWM) and reset by writing 5 to
/proc/PID/clear_refs (Linux 4.0+), so the peak read when it closes is the peak of those steps alone: the
steady state, past the start-up (the model built whole, then sharded) and the first step's allocations.
CPU time is the rank's user + system time from /proc/PID/stat at each end. The whole run's peak is
getrusage's of the child. Writes DIR/rank<N>.json (N: OMPI_COMM_WORLD_RANK); exits with the command's status.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M).group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--watch", required=True)
    parser.add_argument("--from-step", type=int, required=True)
    parser.add_argument("--to-step", type=int, required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    opens = re.compile(rf"^step +{args.from_step} \|", re.M)
    closes = re.compile(rf"^step +{args.to_step} \|", re.M)

    child = subprocess.Popen(command)
    report = {"rank": rank}
    while child.poll() is None:
        try:
            with open(args.watch) as f:
                text = f.read()
        except OSError:
            text = ""
        try:
            if "window_cpu_start" not in report and opens.search(text):
                report["window_cpu_start"] = cpu_seconds(child.pid)
                report["peak_before_window_kib"] = peak_kib(child.pid)
                with open(f"/proc/{child.pid}/clear_refs", "w") as f:
                    f.write("5")
            elif "window_cpu_start" in report and "window_cpu_end" not in report and closes.search(text):
                report["window_cpu_end"] = cpu_seconds(child.pid)
                report["window_peak_kib"] = peak_kib(child.pid)
        except OSError:  # the child ended between poll() and the read
            pass
        time.sleep(0.05)
    # poll() reaped it; the largest peak of the reaped children is its own, the only child.
    report["whole_run_peak_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    report["returncode"] = child.returncode
    if "window_cpu_end" in report:
        report["window_steps"] = args.to_step - args.from_step
        report["cpu_s_per_step"] = (report["window_cpu_end"] - report["window_cpu_start"]) / report["window_steps"]
    os.makedirs(args.report, exist_ok=True)
    with open(os.path.join(args.report, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
