"""Op-level profiles: where each millisecond of a step went, class by class.

The trainer runs train.profile_steps steps under the framework's profiler after a cell's
timed steps (never during them), with the step clock around each, and keeps the raw profile
(an XSpace, *.xplane.pb: TensorBoard's and XProf's format). This module turns that file into
per-op self times (xprof's framework_op_stats, offline, no TensorFlow needed) and per-class
milliseconds per step (measure/opclasses.py).

Counting. On a CPU everything runs on the host; an op's self time is its time on the thread
that ran it, with its intra-op worker threads' work inside it. Ops that ran at once on
different threads (inter-op parallelism) would count twice, so when the ops' self times add
up to more than the profiled steps' wall time, each class's share is its part of the ops'
total instead of the wall time (the ratio is recorded as `concurrency`). On a GPU the
device's ops are counted from the device's lines of the trace, the input pipeline from the
host's. The profiler slows small ops down (a few microseconds each), so the shares, not the
profiled milliseconds, are applied to the cell's measured median step; what is left of it is
host overhead/idle: framework and Python work between ops, and waiting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mptbench.core.opclasses import OP_CLASSES, op_class


def xplane_of(logdir: str | Path) -> Path | None:
    """The profile the profiler wrote under logdir (plugins/profile/<run>/<host>.xplane.pb)."""
    found = sorted(Path(logdir).glob("plugins/profile/*/*.xplane.pb"))
    return found[-1] if found else None


def op_stats(xplane: str | Path) -> list[dict[str, Any]]:
    """Per-op rows of xprof's framework_op_stats: host_or_device, type, operation,
    occurrences, total_self_time (microseconds)."""
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([str(xplane)], "framework_op_stats", {})
    table = json.loads(data)[0]
    columns = [c["id"] for c in table["cols"]]
    return [
        dict(zip(columns, [cell.get("v") if cell else None for cell in row["c"]], strict=True))
        for row in table["rows"]
    ]


def classify(rows: list[dict], scopes: dict[str, str | None]) -> dict[str, float]:
    """Microseconds of self time per class, from the device's rows where there are any."""
    on_device = any(r["host_or_device"] == "Device" for r in rows)
    totals = dict.fromkeys(OP_CLASSES, 0.0)
    for row in rows:
        if row["type"] == "IDLE":
            continue  # idle thread time: not step time
        cls = op_class(row["type"], row["operation"] or "", **scopes)
        # On a GPU the device's lines time the math; the host's only the input pipeline.
        if on_device and row["host_or_device"] != "Device" and cls != "input":
            continue
        totals[cls] += float(row["total_self_time"] or 0)
    return totals


def breakdown(
    xplane: str | Path, steps: int, profiled_ms: float, measured_ms: float, scopes: dict
) -> dict[str, Any]:
    """ms per step per class, host overhead/idle included, adding up to measured_ms.

    The profile gives each class's share of the profiled steps' wall time (its self time over
    that wall time, or over the ops' total where ops overlapped); those shares are applied to
    the cell's measured median step, which the profiler did not slow down. The profiled
    steps' own wall time is kept beside them: what profiling cost this cell.
    """
    totals = classify(op_stats(xplane), scopes)
    ops_ms = {cls: us / 1000 / steps for cls, us in totals.items()}
    busy = sum(ops_ms.values())
    span = max(busy, profiled_ms) or 1.0
    classes = {cls: measured_ms * ms / span for cls, ms in ops_ms.items()}
    classes["host_overhead"] = measured_ms * (1 - busy / span)
    return {
        "classes_ms": classes,
        "profiled_ms_per_step": profiled_ms,
        "ops_ms_per_step": busy,
        "profile_steps": steps,
        "concurrency": max(1.0, busy / profiled_ms) if profiled_ms else 1.0,
        "top_ops": _top_ops(xplane, steps, scopes),
    }


def _top_ops(xplane, steps: int, scopes: dict, count: int = 15) -> list[dict]:
    rows = [r for r in op_stats(xplane) if r["type"] != "IDLE"]
    rows.sort(key=lambda r: -(r["total_self_time"] or 0))
    return [
        {
            "type": r["type"], "operation": r["operation"],
            "class": op_class(r["type"], r["operation"] or "", **scopes),
            "ms_per_step": (r["total_self_time"] or 0) / 1000 / steps,
        }
        for r in rows[:count]
    ]  # fmt: skip
