"""The budget: two probe points give a fixed and a per-image cost; only a certain or clearly
predicted overrun skips a cell."""

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import ProbePoint, ProbeResult
from mptbench.jobs.budget import PREDICTION_TOLERANCE, assess, predict


def _point(batch_size: int, step_s: float) -> ProbePoint:
    return ProbePoint(batch_size, step_s, [step_s], step_s)


POINTS = [_point(4, 0.5), _point(32, 2.4)]


def _run(batch_size, limit=20):
    return smoke_cell_run(batch_size=batch_size, max_step_seconds=limit)


def _probe(points):
    return ProbeResult("tensorflow", "pypi", "cpu", "float32", 32, points)


def test_prediction_is_a_fixed_plus_a_per_image_cost():
    per_image = (2.4 - 0.5) / 28
    assert predict(POINTS, 256) == pytest.approx(2.4 + per_image * 224)
    # One point (the probe stopped at the smaller batch): proportional.
    assert predict(POINTS[:1], 64) == pytest.approx(8.0)
    # Noise that makes the line fall: proportional to the larger point.
    falling = [_point(4, 1.0), _point(8, 0.9)]
    assert predict(falling, 16) == pytest.approx(1.8)


def test_a_cell_predicted_within_the_tolerance_runs():
    limit = predict(POINTS, 256) / (1 + PREDICTION_TOLERANCE / 2)  # predicted 15% over
    verdict = assess(_run(256, limit), _probe(POINTS))
    assert verdict["predicted_step_s"] == pytest.approx(predict(POINTS, 256))
    assert "outcome" not in verdict


def test_a_cell_predicted_far_over_the_limit_is_skipped_with_why():
    verdict = assess(_run(512, limit=5), _probe(POINTS))
    assert verdict["outcome"] == "over_budget"
    assert "by more than 30%" in verdict["reason"]


def test_a_probe_step_already_over_the_limit_skips_larger_cells_for_certain():
    probe = _probe([_point(4, 30.0)])
    verdict = assess(_run(32), probe)
    assert verdict["outcome"] == "over_budget"
    assert "a probe step at batch 4 already took 30.0 s" in verdict["reason"]


def test_no_limit_or_no_probe_predicts_nothing():
    assert assess(_run(32, limit=None), _probe(POINTS)) == {}
    assert assess(_run(32), None) == {}


@pytest.mark.parametrize("outcome", ["unsupported", "oom", "crashed"])
def test_a_probe_that_ended_otherwise_gives_every_cell_of_its_policy_that_outcome(outcome):
    probe = _probe([])
    probe.outcome, probe.reason = outcome, "oneDNN: could not create a primitive descriptor"
    assert assess(_run(8), probe) == {
        "outcome": outcome, "reason": "its probe: oneDNN: could not create a primitive descriptor"}
    assert assess(_run(8, limit=None), probe)["outcome"] == outcome  # with no step limit too
