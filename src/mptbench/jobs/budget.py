"""The step-time budget: a probe times a few steps at two small batch sizes once per variant,
device and policy (engine/probe.py); each cell predicts its own step from a fixed plus a
per-image cost, so a CPU skips what would take hours and runs everything else.

A cell is skipped (over_budget) only when that is certain or clearly predicted: a probe step
at a batch no larger than the cell's already took longer than train.max_step_seconds, or the
prediction exceeds it by more than the prediction's tolerance. Every other cell runs, and the
trainer stops one whose first two timed steps are both over the limit, recording them.
"""

from __future__ import annotations

from typing import Any

from mptbench.core.contract import ProbePoint, ProbeResult, Run
from mptbench.core.outcomes import Outcome
from mptbench.core.record import PREDICTION_TOLERANCE  # a cell over it still runs a step


def predict(points: list[ProbePoint], batch_size: int) -> float:
    """Seconds per step at batch_size: a line through the two probe points (a fixed cost plus
    one per image); proportional to the one point when there is only one, or when noise makes
    the line fall."""
    (b1, t1), *rest = [(p.batch_size, p.step_s) for p in points]
    if not rest:
        return t1 * batch_size / b1
    b2, t2 = rest[0]
    per_image = (t2 - t1) / (b2 - b1)
    if per_image <= 0:
        return t2 * batch_size / b2
    return t2 + per_image * (batch_size - b2)


def assess(run: Run, probe: ProbeResult | None) -> dict[str, Any]:
    """The cell's predicted step; and, when it is over the budget, the outcome and why; or
    where its probe ended otherwise (unsupported, oom, crashed), that outcome and why."""
    if probe is not None and probe.outcome != Outcome.OK:
        return {"outcome": probe.outcome, "reason": f"its probe: {probe.reason}"}
    limit, batch_size = run.train.max_step_seconds, run.cell.batch_size
    if not (limit and probe and probe.points):
        return {}
    predicted = predict(probe.points, batch_size)
    verdict: dict[str, Any] = {"predicted_step_s": predicted}
    measured = [p for p in probe.points if p.batch_size <= batch_size and p.step_s > limit]
    if measured:
        p = measured[0]
        verdict["reason"] = (
            f"a probe step at batch {p.batch_size} already took {p.step_s:.1f} s "
            f"> train.max_step_seconds={limit}"
        )
    elif predicted > limit * (1 + PREDICTION_TOLERANCE):
        verdict["reason"] = (
            f"predicted {predicted:.1f} s/step from the probe (batch "
            f"{', '.join(str(p.batch_size) for p in probe.points)}) > "
            f"train.max_step_seconds={limit} by more than {100 * PREDICTION_TOLERANCE:.0f}%"
        )
    if "reason" in verdict:
        verdict["outcome"] = Outcome.OVER_BUDGET
    return verdict
