"""How a cell ended. Every cell ends with one of these, each only on evidence; anything else
fails the job loudly.

  ok           trained; timing recorded
  oom          out of memory: a ResourceExhaustedError, train.memory_limit_mb crossed, or the
               kernel's own record of an OOM kill (the cgroup's oom_kill count rose)
  killed       the trainer died of a signal with no sign of memory trouble (signal recorded)
  nonfinite    the loss became NaN or Inf
  unsupported  no kernel is registered for this policy's dtype on this device

Which errors of a framework are oom or unsupported, each backend says (backends.py).
  over_budget  a step is (or is clearly predicted to be) slower than train.max_step_seconds
"""

from __future__ import annotations

import signal

OUTCOMES = ("ok", "oom", "killed", "nonfinite", "unsupported", "over_budget")
# How the report and the terminal name each outcome.
WORDS = {
    "ok": "ok",
    "oom": "OOM",
    "killed": "killed",
    "over_budget": "over budget",
    "nonfinite": "NaN/Inf",
    "unsupported": "unsupported",
}


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def classify_death(code: int, over_limit: str | None, oom_record: str | None) -> tuple[str, str]:
    """The outcome of a trainer that died (negative code: the signal that killed it)."""
    if over_limit:
        return "oom", over_limit
    if oom_record:
        return "oom", f"the kernel's OOM killer killed the trainer ({oom_record})"
    name = signal.Signals(-code).name if code < 0 else f"exit code {code}"
    return "killed", (
        f"the trainer was killed by {name}; no out-of-memory record (memory limit not crossed, "
        "the cgroup's oom_kill count unchanged), so it was killed from outside"
    )
