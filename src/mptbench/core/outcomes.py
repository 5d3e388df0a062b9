"""How a cell ended: `Outcome`, the one list of them. Every cell ends with one, each only on
evidence; anything else fails the job loudly.

  ok           trained; timing recorded
  oom          out of memory: a ResourceExhaustedError, train.kill_above_mb crossed (a fit try
               on a CPU: device.<kind>.fits_search_mb), or the kernel's record of an OOM
               kill of the trainer itself (jobs/memory.py)
  killed       the trainer died of a signal sent from outside (SIGKILL, SIGTERM, ...) with no
               sign of memory trouble (signal recorded)
  crashed      the trainer died of its own fault: SIGSEGV, SIGABRT, SIGBUS, SIGILL or SIGFPE
  nonfinite    the loss became NaN or Inf
  unsupported  no kernel is registered for this policy's dtype on this device
  over_budget  a step is (or is clearly predicted to be) slower than train.max_step_seconds

Which errors of a framework are oom or unsupported, each backend says (backends.py).
"""

from __future__ import annotations

import re
import signal
from enum import StrEnum


class Outcome(StrEnum):
    """A StrEnum: a member equals its string ("ok"), so records, summary.csv and MLflow tags
    hold the plain word, and a value read back from any of them compares equal to it."""

    OK = "ok"
    OOM = "oom"
    KILLED = "killed"
    CRASHED = "crashed"
    NONFINITE = "nonfinite"
    UNSUPPORTED = "unsupported"
    OVER_BUDGET = "over_budget"


# The outcomes of a cell that failed: over_budget is a cell not run, not a failure.
FAILED = (Outcome.OOM, Outcome.KILLED, Outcome.NONFINITE, Outcome.UNSUPPORTED, Outcome.CRASHED)
# Signals a process raises on itself when it faults: a crash, not a kill from outside.
CRASH_SIGNALS = ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE")
# How the report and the terminal name each outcome.
WORDS = {
    Outcome.OK: "ok",
    Outcome.OOM: "OOM",
    Outcome.KILLED: "killed",
    Outcome.CRASHED: "crashed",
    Outcome.OVER_BUDGET: "over budget",
    Outcome.NONFINITE: "NaN/Inf",
    Outcome.UNSUPPORTED: "unsupported",
}


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def classify_death(
    code: int, over_limit: str | None, oom_record: str | None, notes: list[str] | None = None
) -> tuple[Outcome, str]:
    """The outcome of a trainer that died (negative code: the signal that killed it).
    `oom_record`: the kernel's record of an OOM kill that was the trainer's own; `notes`: what
    else was seen (another process's OOM kill in a cgroup the trainer shared)."""
    if over_limit:
        return Outcome.OOM, over_limit
    if oom_record:
        return Outcome.OOM, f"the kernel's OOM killer killed the trainer ({oom_record})"
    name = signal.Signals(-code).name if code < 0 else f"exit code {code}"
    if name in CRASH_SIGNALS:
        return Outcome.CRASHED, (
            f"the trainer crashed with {name}: a fault of its own (the framework, a kernel, "
            "memory corruption), not a kill from outside; its output is in the job's log"
        )
    seen = "; ".join(notes or []) or "no OOM kill counted"
    return Outcome.KILLED, (
        f"the trainer was killed by {name}; no out-of-memory record of its own (memory limit "
        f"not crossed; {seen}), so it was killed from outside"
    )


# A library that refuses a dtype at the instruction set it may use, in the words C++ prints as
# it aborts: oneDNN's, for a bfloat16 matmul capped at AVX2 (core/isa.py).
REFUSED = re.compile(r"what\(\):\s*(could not create a primitive descriptor for (?:the|a) [\w ]+?"
                     r" primitive)")


def refusal(code: int, output: list[str]) -> tuple[Outcome, str] | None:
    """An abort whose last output is a library saying it has no kernel: unsupported, in its
    words, not a crash."""
    if code != -signal.SIGABRT:
        return None
    for line in reversed(output):
        found = REFUSED.search(line)
        if found:
            return Outcome.UNSUPPORTED, f"oneDNN: {found.group(1)} (the process aborted)"
    return None

