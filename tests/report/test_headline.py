"""The headline's best of N: its interval widened for the choice, on the cell's own degrees of
freedom, so it is never narrower than the cell's own 95% interval."""

import math

import pytest
from records import record

from mptbench.core import stats
from mptbench.report.headline import best, headline_lines, lines, metrics_and_tags
from mptbench.report.summary import summarise

# Per-process log speedups of one cell, 5 processes of which the first 3 were planned.
STEIN_LOGS = [0.0165, 0.04, 0.0635, 0.04, 0.04]


def _cell(policy: str, logs: list[float], planned: int | None = None, baseline=False,
          host_widening: float = 0.0) -> dict:
    """A record timed in one process per log speedup, 4 steps in 4 rounds each, without a
    whole run's time; `planned`: train.repeats (the first stage under Stein's procedure)."""
    repeats = [
        {
            "repeat": i + 1,
            "process": f"p{i}",
            "outcome": "ok",
            "step_ms": [100.0 * math.exp(-x)] * 4,
            "rounds": [0, 1, 2, 3],
        }
        for i, x in enumerate(logs)
    ]
    return record(
        machine="local", model="m", policy=policy, compute_dtype="float32" if baseline
        else "bfloat16", baseline=baseline, repeats=repeats, fullrun_s=None,
        host_widening=host_widening,
        **({"config": {"train": {"repeats": planned}}} if planned else {}),
    )


def _summary(logs: list[float], others: int, planned: int | None = None):
    """The cell with `logs` and `others` slower cells beside it, each against one baseline."""
    records = [
        _cell("float32", [0.0] * len(logs), planned, baseline=True),
        _cell("best", logs, planned),
    ]
    records += [_cell(f"slower{k}", [x - 0.2 for x in logs], planned) for k in range(others)]
    return summarise(records)


def _t_of(estimate: stats.Estimate) -> float:
    return estimate.log_half_width / estimate.log_se


@pytest.mark.parametrize(
    ("planned", "count", "df"),
    [(3, 4, 2), (3, 2, 2), (None, 4, 4), (None, 2, 4)],
    ids=["stein-best-of-4", "stein-best-of-2", "5-processes-best-of-4", "5-processes-best-of-2"],
)
def test_the_best_of_n_is_widened_on_the_cells_own_degrees_of_freedom(planned, count, df):
    summary = _summary(STEIN_LOGS, count - 1, planned)
    top = best(summary)
    row = top.row
    assert row["policy"] == "best" and top.count == count and row["speedup_df"] == df
    # Stein: 8.86 for the best of 4 (not 4.31, 5 processes less one), 6.21 for the best of 2.
    assert _t_of(top.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / count, df))
    assert top.estimate.low <= row["speedup_ci_low"] and top.estimate.high >= row["speedup_ci_high"]
    assert top.estimate.high - top.estimate.low > row["speedup_ci_high"] - row["speedup_ci_low"]


def test_the_best_of_one_is_the_cells_own_interval_host_widening_and_all():
    """A cell whose processes all ran on a slowed host: summary.csv widens its interval
    (host_widening); the headline's best of one is that interval, not a narrower one."""
    summary = summarise([_cell("float32", [0.0] * 5, 3, baseline=True),
                         _cell("best", STEIN_LOGS, 3, host_widening=0.05)])
    top = best(summary)
    assert top.count == 1 and top.row["host_widening"] == 0.05
    assert (top.estimate.low, top.estimate.high) == pytest.approx(
        (top.row["speedup_ci_low"], top.row["speedup_ci_high"]))


def test_a_cell_the_summary_calls_no_measurable_difference_is_not_faster_in_the_metrics():
    """The reproduced case: 5 processes after a first stage of 3, 1.04x whose own 95% interval
    (0.995-1.089) holds 1; the best of 2 read 1.00-1.08, faster, on 4 degrees of freedom. The
    group's line counts cells only: the answer is the one verdict."""
    summary = _summary(STEIN_LOGS, 1, planned=3)
    row = summary.set_index("policy").loc["best"]
    assert row["speedup_verdict"] == "no measurable difference" and row["speedup_ci_low"] < 1
    assert stats.verdict(best(summary).estimate) == "no measurable difference"
    assert lines(summary) == ["m on tensorflow · pypi · cpu: 3 of 3 cells ran, 0 over budget, "
                              "0 failed"]
    metrics, tags = metrics_and_tags(summary)
    assert metrics["best_speedup_ci_low.local.m.tensorflow.pypi.cpu"] < 1
    assert not any(key.startswith("best.") for key in tags)  # no second verdict as a tag


def test_a_cell_without_an_interval_is_unjudged():
    summary = _summary([0.05], 0)
    top = best(summary)
    assert top.estimate is None
    metrics, _ = metrics_and_tags(summary)
    assert metrics["best_speedup.local.m.tensorflow.pypi.cpu"] == pytest.approx(1.05, abs=0.005)
    assert not any(k.startswith("best_speedup_ci_") for k in metrics)


def test_the_headline_and_the_sweeps_tags_open_with_the_answers_lead():
    """The answer's lead first (the most images per second against the baseline's best), its
    details under it, then the group's cells; the sweep run's tag is the lead."""
    summary = _summary(STEIN_LOGS, 1, planned=3)
    summary["images_per_sec"] = 80.0 * summary["speedup_vs_baseline"]
    lead, *details = headline_lines(summary)[:-1]
    assert lead == ("m on cpu: Keep float32: best's best is 1.04× float32's best (0.98–1.11), "
                    "no measurable difference.")
    assert details[:2] == ["  best at batch 8: 83.3 images/s; float32's best, at batch 8: 80 "
                           "images/s.", "  The interval is widened for the best of 2, timed "
                           "in the same processes."]
    assert headline_lines(summary)[-1:] == lines(summary)
    metrics, tags = metrics_and_tags(summary)
    assert tags["answer.local.m.cpu"] == lead
    assert metrics["answer_vs_baseline.local.m.cpu"] == pytest.approx(1.04, abs=0.005)
    assert metrics["answer_images_per_sec.local.m.cpu"] == 80.0
    assert "best_speedup.local.m.tensorflow.pypi.cpu" in metrics


def test_the_terminal_says_per_comparison_how_many_processes_it_took_and_why_no_more():
    base = _cell("float32", [0.0] * 5, 3, baseline=True)
    summary = summarise([base, _cell("best", STEIN_LOGS, 3) | {"processes_why": "most"}])
    assert lines(summary) == [
        "m on tensorflow · pypi · cpu: 2 of 2 cells ran, 0 over budget, 0 failed",
        "  best at batch 8: 5 processes, train.max_repeats reached"]
