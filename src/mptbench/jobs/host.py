"""The host's fastest speed, kept across runs, and a cell's slowdown against it (core/host.py).

A train job's processes time a fixed kernel (engine/host.py). The fastest of them is only the
fastest of this job: a job that ran wholly in a busy spell would find itself at its own speed.
So the fastest any job ever recorded on this host, with this backend, variant and device (and
the kernel's size, and the framework's version: either changes the kernel's time) is kept
beside the results (plan/layout.py HOST), and each job sets its processes against the faster
of that and its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mptbench.core import host
from mptbench.core.contract import ArmResult, Run
from mptbench.core.files import write_json
from mptbench.core.outcomes import Outcome


def _key(run: Run, fingerprint: dict[str, Any]) -> dict[str, Any]:
    """What the kernel's time depends on besides the host's load."""
    return {"size": run.device.host_check["size"], "backend": run.cell.backend,
            "version": fingerprint.get(run.cell.backend)}


class Reference:
    """The fastest host_ms on record for one host, backend, variant and device (kept at
    `path`; none without one): the file's, where it was taken with the same kernel and
    framework, and each process's offered since, where faster."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self.fastest_ms: float | None = None
        self.key: dict[str, Any] | None = None

    def _kept(self, key: dict[str, Any]) -> float | None:
        try:
            kept = json.loads(self.path.read_text()) if self.path else {}
        except (OSError, ValueError):
            return None
        if kept.get("key") != key or not kept.get("fastest_ms"):
            return None
        return float(kept["fastest_ms"])

    def offer(self, run: Run, result: ArmResult) -> None:
        """A process's host_ms: the fastest so far where it is faster (and kept at once)."""
        ms = result.measured.get("host_ms")
        if result.outcome != Outcome.OK or not ms:
            return
        key = _key(run, result.fingerprint)
        if key != self.key:  # the first process, or another kernel size or framework
            self.key, self.fastest_ms = key, self._kept(key)
        if self.fastest_ms is None or ms < self.fastest_ms:
            self.fastest_ms = float(ms)
            if self.path:
                write_json(self.path, {"fastest_ms": self.fastest_ms, "key": key})


def figures(ok: list[ArmResult], fastest_ms: float | None) -> dict[str, Any]:
    """A cell's host columns from its ok repeats."""
    found = host.slowdown([r.measured.get("host_ms") for r in ok], fastest_ms)
    if found is None:
        return {}
    return {
        "host_fastest_ms": found.fastest_ms,
        "host_slowdown": found.mean,
        "host_slowdown_most": found.most,
        "host_widening": found.widening,
    }
