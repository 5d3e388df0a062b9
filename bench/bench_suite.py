"""Where the test suite's CPU goes: README's test command (as .ci/run reads it) under a sampler
that reads every process's CPU time from /proc twice a second, and the test it ran under
(PYTEST_CURRENT_TEST, which a test's children inherit).

    python bench/bench_suite.py                 # the whole suite, ~20 min on 2 cores
    python bench/bench_suite.py --read FILE     # the tables again, from a saved sample
    python bench/bench_suite.py -- tests/test_faults.py   # other pytest arguments

Prints the wall time, the CPU time of every process the run started (children that outlive
their parent's wait included, which `time` misses), the steal, and two tables: CPU seconds per
kind of process (engine jobs, Snakemake, each rule's script, MLflow servers, ...) and per test.
A process shorter than the sampling interval is missed; its CPU is in no table. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from common import ROOT, WORK, Steal, machine

TICKS = os.sysconf("SC_CLK_TCK")
TEST = b"PYTEST_CURRENT_TEST="
NO_TEST = "(no test: pytest's workers, whose CPU holds the in-process tests)"


def readme_command() -> str:
    """The test half of README's test command (after its last `&&`), as .ci/run finds it."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- test-command -->", 1)[1].split("```sh", 1)[1]
    return block.strip().splitlines()[0].rsplit(" && ", 1)[-1]


def _stat(pid: str) -> tuple[float, str] | None:
    """(CPU seconds, start time in ticks) of a live process; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS, fields[19]


def _first_seen(pid: str) -> dict | None:
    """What a new process is: its command line and the test it runs under ('' for none)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    test = next((v[len(TEST) :] for v in environ if v.startswith(TEST)), b"")
    return {"cmd": cmdline.decode(errors="replace")[:300],
            "test": test.decode(errors="replace").rsplit(" (", 1)[0], "cpu": 0.0}


def sample(seen: dict, stop: threading.Event, before: set[str], every_s: float = 0.5) -> None:
    """Until `stop`: every process not running `before` the suite, by pid and start time."""
    while not stop.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            found = _stat(pid)
            if found is None or f"{pid}:{found[1]}" in before:
                continue
            key = f"{pid}:{found[1]}"
            if key not in seen:
                first = _first_seen(pid)
                if first is None:
                    continue
                seen[key] = first
            seen[key]["cpu"] = found[0]
        stop.wait(every_s)


def kind(cmd: str) -> str:
    """A process's kind: an engine job, a rule's script, Snakemake, a module run with -m, ..."""
    if not cmd.strip():
        return "kernel threads"
    if "mptbench.engine" in cmd:
        return "engine job"
    script = re.search(r"\.snakemake/scripts/tmp\w+\.(\w+)\.py", cmd)
    if script:
        return f"rule script: {script.group(1)}"
    if re.search(r"/snakemake( |$)", cmd):
        return "snakemake"
    module = re.search(r" -m ([\w.]+)", cmd)
    if module:
        return f"-m {module.group(1)}"
    return Path(cmd.split(" ", 1)[0]).name or "?"


def tables(seen: dict, top: int) -> str:
    """CPU seconds per kind of process and per test, largest first."""
    by_kind, count, by_test = Counter(), Counter(), defaultdict(Counter)
    for process in seen.values():
        name = kind(process["cmd"])
        by_kind[name] += process["cpu"]
        count[name] += 1
        by_test[process["test"] or NO_TEST][name] += process["cpu"]
    lines = ["| kind of process | processes | CPU s |", "| --- | --- | --- |"]
    lines += [f"| {k} | {count[k]} | {s:.0f} |" for k, s in by_kind.most_common(top)]
    lines += ["", "| test (its fixtures' setup included) | CPU s | mostly |",
              "| --- | --- | --- |"]
    totals = sorted(by_test.items(), key=lambda item: -sum(item[1].values()))
    for test, kinds in totals[:top]:
        most = ", ".join(f"{k} {s:.0f}" for k, s in kinds.most_common(2))
        lines.append(f"| {test} | {sum(kinds.values()):.0f} | {most} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", type=Path, help="print the tables of a saved sample")
    parser.add_argument("--out", type=Path, default=WORK / "suite.json", help="the sample")
    parser.add_argument("--top", type=int, default=25, help="rows per table")
    parser.add_argument("pytest", nargs="*", help="pytest arguments for README's")
    args = parser.parse_args()
    if args.read:
        print(tables(json.loads(args.read.read_text()), args.top))
        return
    command = readme_command().split() + args.pytest
    before = {f"{pid}:{s[1]}" for pid in filter(str.isdigit, os.listdir("/proc"))
              if (s := _stat(pid))}
    seen, stop, steal = {}, threading.Event(), Steal()
    sampler = threading.Thread(target=sample, args=(seen, stop, before), daemon=True)
    started = time.monotonic()
    sampler.start()
    done = subprocess.run(command, cwd=ROOT, check=False)
    wall = time.monotonic() - started
    stop.set()
    sampler.join()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(seen))
    cpu = sum(p["cpu"] for p in seen.values())
    print(f"\n{machine()}; steal {steal.percent() or 0:.1f}%; pytest exit {done.returncode}")
    print(f"wall {wall / 60:.1f} min; CPU {cpu / 60:.1f} min in {len(seen)} processes "
          f"(sample: {args.out})\n")
    print(tables(seen, args.top))
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
