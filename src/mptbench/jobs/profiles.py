"""Op-level profiles: where each millisecond of a step went, class by class, as measured.

The trainer runs train.profile_steps steps under the framework's profiler after each repeat's
timed steps (never during them), with the step clock around each, and keeps the raw profile
(an XSpace, *.xplane.pb: TensorBoard's and XProf's format). This module reads it offline, no
TensorFlow needed:

- each op's self time, from xprof's framework_op_stats, classed (core/opclasses.py): the raw
  profiled milliseconds per step of each class. tf.data's own threads preparing the next
  batches while the step computes are "background input": they overlap the step and are not
  part of its sum;
- from the timeline (the XSpace's threads and events): the step's executor threads (TensorFlow's
  inter-op threads, tf_Compute), each step's window (the train function's call on the Python
  thread), and on those threads within those windows the executor's own time between ops
  ("framework") and the threads' waiting ("idle").

Nothing is rescaled. The profiled step (the step clock's mean, under the profiler) and the
timed step (the cell's, without it) are kept side by side. Over the executor threads, the op
classes plus framework plus idle should account for the profiled step times the threads:
`closure` is that sum over threads times the profiled step, and what it leaves is
"unattributed". The op times come from xprof's analysis, framework and idle from the
timeline, the profiled step from the step clock: three sources, so a closure far from 1 means
one of them is wrong. The step clock's mean, not its median, because the timeline sums every
profiled step: one step slowed by a busy host moves both alike.

The step clock starts before the train function is called and stops after the loss is read:
what it has beyond the function's window (`function_ms_per_step`, the windows' mean) is Python
and callbacks around the step, a part of a short step that a busy host can make large (a
smoke cell's step of 8-25 ms closed at 0.6 under a full test run). Against the window alone the
classes close within a few percent at any step length; against the profiled step they close
only where the step is long enough for that Python to be small. On a GPU the device's lines
time the math and the host's only the input; no closure is computed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mptbench.core.opclasses import OP_CLASSES, OUTSIDE, STEP_CLASSES, layer_of, op_class

# The Python thread's event for one call of Keras' compiled train function: one step, or one
# block of steps on GPUs.
STEP_EVENT = "step_on_iterator"
EXECUTOR_LINES = ("tf_Compute",)
EXECUTOR_EVENT = "ExecutorState::Process"
OP_EVENT = re.compile(r"[^:]:[A-Za-z_]")  # "scope/name:Type", as TensorFlow names an op's event


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


def _counted(rows: list[dict], scopes: dict[str, str | None]):
    """(row, its class) of every op row that counts: not the idle rows (the timeline's per
    thread is read instead), and on a GPU, where the device's lines time the math, the host's
    only for the input pipeline."""
    on_device = any(r["host_or_device"] == "Device" for r in rows)
    for row in rows:
        if row["type"] == "IDLE":
            continue
        cls = op_class(row["type"], row["operation"] or "", **scopes)
        on_host_only = cls in ("input", "background_input")
        if on_device and row["host_or_device"] != "Device" and not on_host_only:
            continue
        yield row, cls


def classify(rows: list[dict], scopes: dict[str, str | None]) -> dict[str, float]:
    """Microseconds of self time per op class, from the device's rows where there are any."""
    totals = dict.fromkeys(OP_CLASSES, 0.0)
    for row, cls in _counted(rows, scopes):
        totals[cls] += float(row["total_self_time"] or 0)
    return totals


def layer_rows(rows: list[dict], steps: int, scopes: dict[str, str | None],
               layers: dict[str, str]) -> list[dict[str, Any]]:
    """Per layer of the model and op class, what its ops took a profiled step (self time,
    summed over the step's threads, as the classes are), how many of them ran a step and of
    which op types; the ops outside every layer (the optimizer, the loss, the input) under
    OUTSIDE. What overlaps the step (background input) is in no row, so the rows add up to
    the classes of the step."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for row, cls in _counted(rows, scopes):
        if cls == "background_input":
            continue
        layer = layer_of(row["operation"] or "", scopes.get("model_scope"), layers) or OUTSIDE
        entry = found.setdefault((layer, cls), {
            "layer": layer, "layer_type": layers.get(layer, OUTSIDE), "op_class": cls,
            "ms": 0.0, "ops": 0.0, "op_types": set()})
        entry["ms"] += float(row["total_self_time"] or 0) / 1000 / steps
        entry["ops"] += float(row["occurrences"] or 0) / steps
        entry["op_types"].add(row["type"])
    return [entry | {"op_types": sorted(entry["op_types"])}
            for _, entry in sorted(found.items(), key=lambda kv: -kv[1]["ms"])]


def _union(intervals: list[tuple[int, int]]) -> int:
    """ns covered by the union of [start, end) intervals."""
    covered, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            covered += b - a
            end = b
        elif b > end:
            covered += b - end
            end = b
    return covered


def _clip(events, window: tuple[int, int]) -> list[tuple[int, int]]:
    lo, hi = window
    return [(max(s, lo), min(e, hi)) for s, e in events if e > lo and s < hi]


def timeline(xplane: str | Path) -> dict[str, Any] | None:
    """From the host's timeline: the step windows (and their ns in all), the executor threads,
    and within the windows on those threads the executor's own ns (framework) and the threads'
    idle ns. None where the profile has no such threads (a GPU's, or another framework's)."""
    from xprof import profile_data

    host = next((p for p in profile_data.ProfileData.from_file(str(xplane)).planes
                 if p.name == "/host:CPU"), None)
    if host is None:
        return None
    windows, threads = [], []
    for line in host.lines:
        events = [(e.start_ns, e.start_ns + e.duration_ns, e.name) for e in line.events]
        windows += [(s, e) for s, e, name in events if name.endswith(STEP_EVENT)]
        if line.name.startswith(EXECUTOR_LINES) and any(OP_EVENT.search(n) for *_, n in events):
            threads.append(events)
    if not windows or not threads:
        return None
    framework = idle = 0
    spans = sum(e - s for s, e in windows)
    for events in threads:
        ops = [(s, e) for s, e, name in events if OP_EVENT.search(name) and e > s]
        busy = ops + [(s, e) for s, e, name in events if name == EXECUTOR_EVENT]
        for window in windows:
            covered = _union(_clip(busy, window))
            framework += covered - _union(_clip(ops, window))
            idle += window[1] - window[0] - covered
    return {"windows": len(windows), "threads": len(threads), "framework_ns": framework,
            "idle_ns": idle, "window_ns": spans}


def closure(classes: dict[str, float], threads: int, profiled_ms: float) -> dict[str, float]:
    """How the step's classes (op classes, framework, idle: ms per step, summed over the
    executor threads) account for the profiled step on each of `threads` threads: their sum
    over threads times the step (1: all of it), and the ms per step, summed over the threads
    like the classes, left unattributed (below 0 where they account for more than the step:
    something was counted twice)."""
    accounted = sum(v for c, v in classes.items() if c in STEP_CLASSES and c != "unattributed")
    return {
        "closure": accounted / threads / profiled_ms if profiled_ms else float("nan"),
        "unattributed": threads * profiled_ms - accounted,
    }


def breakdown(xplane: str | Path, steps: int, profiled_ms: float, scopes: dict,
              layers: dict[str, str] | None = None) -> dict[str, Any]:
    """ms per profiled step per class, as measured, and how they close on the profiled step;
    and the same ops by the model's layer (`layers`: its layers, name -> type).

    `steps`: the steps profiled; `profiled_ms`: their mean, by the step clock."""
    rows = op_stats(xplane)
    ops = {cls: us / 1000 / steps for cls, us in classify(rows, scopes).items()}
    classes = dict(ops)  # framework, idle and unattributed only where the timeline tells
    found = timeline(xplane)
    out: dict[str, Any] = {"profiled_ms_per_step": profiled_ms, "profile_steps": steps}
    if found:
        classes["framework"] = found["framework_ns"] / 1e6 / steps
        classes["idle"] = found["idle_ns"] / 1e6 / steps
        closed = closure(classes, found["threads"], profiled_ms)
        classes["unattributed"] = closed["unattributed"]
        out |= {"threads": found["threads"], "closure": closed["closure"],
                "function_ms_per_step": found["window_ns"] / 1e6 / steps}
    ops_ms = sum(v for c, v in ops.items() if c != "background_input")
    out |= {
        "classes_ms": classes,
        "ops_ms_per_step": ops_ms,
        "concurrency": ops_ms / profiled_ms if profiled_ms else None,
        "top_ops": _top_ops(rows, steps, scopes),
        "layers": layer_rows(rows, steps, scopes, layers or {}),
    }
    return out


def _top_ops(rows: list[dict], steps: int, scopes: dict, count: int = 15) -> list[dict]:
    rows = [r for r in rows if r["type"] != "IDLE"]
    rows.sort(key=lambda r: -(r["total_self_time"] or 0))
    return [
        {
            "type": r["type"], "operation": r["operation"],
            "class": op_class(r["type"], r["operation"] or "", **scopes),
            "ms_per_step": (r["total_self_time"] or 0) / 1000 / steps,
        }
        for r in rows[:count]
    ]
