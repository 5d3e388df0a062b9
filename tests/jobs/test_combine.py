"""A cell's record from its repeats."""

import math
import statistics

import pytest

from mptbench.core import stats
from mptbench.core.contract import ArmResult, ModelInfo
from mptbench.jobs.combine import combine, median_layers, model_figures


def _repeat(i, steps, outcome="ok", twin=None, reason=None):
    return ArmResult(
        repeat=i, policy="float32", outcome=outcome, reason=reason, step_s=steps,
        rounds=[0] * len(steps), synthetic_step_s=twin or [],
        synthetic_rounds=[0] * len(twin or []), stopped_by="steps", timed_wall_s=sum(steps),
        warmup_s=[1.0], epochs=[{"epoch": 1, "loss": 2.0}], fingerprint={"host": f"h{i}"},
        process=f"p{i}", process_phases_s={"start": 5.0 + i, "timed": 0.3},
    )


def test_three_repeats_give_a_geometric_mean_of_mean_steps_and_a_t_interval_over_processes():
    repeats = [
        _repeat(0, [0.10, 0.11, 0.10], twin=[0.09, 0.09]),
        _repeat(1, [0.20, 0.21, 0.20], twin=[0.18, 0.18]),
        _repeat(2, [0.15, 0.15, 0.16], twin=[0.14, 0.14]),
    ]
    flops = {"conv": 3e9 / 8, "matmul": 1e9 / 8, "other": 1e7}
    info = ModelInfo("m", "layers", [32, 32, 3], 10, 1234, flops, flops, "TensorFlow")
    record = {"predicted_step_s": 0.3} | model_figures(info, batch_size=8)
    combine(record, repeats, batch_size=8)
    assert record["outcome"] == "ok" and record["reason"] is None
    means = (310 / 3, 610 / 3, 460 / 3)  # each process's mean timed step, in ms
    assert record["ms_per_step"] == pytest.approx((means[0] * means[1] * means[2]) ** (1 / 3))
    assert record["ms_per_step_median"] == pytest.approx((100 * 200 * 150) ** (1 / 3))
    assert record["ms_per_step_ci_low"] < 100 and record["ms_per_step_ci_high"] > 210
    assert record["timed_steps"] == record["timed_samples"] == 9 and len(record["repeats"]) == 3
    assert record["repeats"][0]["ms_per_step"] == pytest.approx(means[0])
    assert record["repeats"][0]["ms_per_step_median"] == pytest.approx(100)
    assert [r["phases_s"]["start"] for r in record["repeats"]] == [5.0, 6.0, 7.0]  # per process
    assert record["repeats"][1]["step_ms"] == [200.0, 210.0, 200.0]
    assert record["repeats"][1]["process"] == "p1" and record["repeats"][1]["rounds"] == [0] * 3
    assert record["synthetic_ms_per_step"] == pytest.approx((90 * 180 * 140) ** (1 / 3))
    # Each process's mean step over its twin's, then their geometric mean.
    ratios = (means[0] / 90, means[1] / 180, means[2] / 140)
    assert record["input_bound_ratio"] == pytest.approx(math.prod(ratios) ** (1 / 3))
    assert record["input_bound_ratio_ci_low"] < min(ratios) < max(ratios)
    assert max(ratios) < record["input_bound_ratio_ci_high"]
    assert record["flops_per_step"] == 4e9 and record["conv_flops_per_step"] == 3e9
    assert record["other_flops_per_step"] == 8e7 and record["parameters"] == 1234
    ms = record["ms_per_step"]
    assert record["achieved_tflops"] == pytest.approx(4e9 / (ms / 1000) / 1e12)
    compute = record["synthetic_ms_per_step"] / 1000
    assert record["achieved_tflops_compute"] == pytest.approx(4e9 / compute / 1e12)
    assert record["prediction_error"] == pytest.approx(0.3 / (ms / 1000) - 1)
    assert record["fingerprint"] == {"host": "h0"}
    assert record["images_per_sec"] == pytest.approx(8 / (ms / 1000))
    estimate = stats.step_estimate([r.step_s for r in repeats])
    assert record["ms_per_step_ci_low"] == pytest.approx(1000 * estimate.low)


def test_without_a_twin_the_record_bounds_the_input_by_its_own_cost():
    repeats = [_repeat(i, steps) for i, steps in enumerate([[1.0, 1.0], [1.2, 1.2], [1.1, 1.1]])]
    for r, (wall, cpu) in zip(repeats, [(0.05, 0.06), (0.04, 0.09), (0.05, 0.05)], strict=True):
        r.measured = {"input_ms_per_batch": 1000 * wall, "input_cpu_ms_per_batch": 1000 * cpu}
        r.twin_note = f"no synthetic twin ({r.repeat})"
    record = {}
    combine(record, repeats, batch_size=8)
    assert record["input_ms_per_batch"] == pytest.approx(50.0)
    assert record["input_cpu_ms_per_batch"] == pytest.approx(60.0)
    # The largest over processes: 1.2 / (1.2 - 0.09), against 1.0 / 0.94 and 1.1 / 1.05.
    assert record["input_bound_ratio_most"] == pytest.approx(1.2 / 1.11)
    assert record["twin_note"] == "no synthetic twin (0)" and "input_bound_ratio" not in record
    assert record["repeats"][1]["input_cpu_ms_per_batch"] == pytest.approx(90.0)


def test_what_each_repeat_measured_is_kept_and_the_cell_has_its_median_over_ok_repeats():
    repeats = [_repeat(0, [0.1, 0.1]), _repeat(1, [0.1, 0.1]), _repeat(2, [0.1, 0.1]),
               _repeat(3, [30.0], outcome="over_budget", reason="slow")]
    for r, ms in zip(repeats, (40.0, None, 50.0, 500.0), strict=True):
        r.measured = {} if ms is None else {"input_ms_per_batch": ms, "input_cpu_ms_per_batch": ms}
    record = {}
    combine(record, repeats, batch_size=8)
    assert [r["input_ms_per_batch"] for r in record["repeats"]] == [40.0, None, 50.0, 500.0]
    assert record["input_ms_per_batch"] == 45.0  # the over-budget repeat's is not the cell's
    record = {}
    combine(record, [_repeat(0, [0.1, 0.1])], batch_size=8)
    assert "input_ms_per_batch" not in record and record["repeats"][0]["input_ms_per_batch"] is None


def test_a_cell_says_the_most_cpu_any_of_its_ok_processes_lost_to_the_hypervisor():
    repeats = [_repeat(i, [0.1, 0.1]) for i in range(3)]
    repeats.append(_repeat(3, [30.0], outcome="over_budget", reason="slow"))
    for r, stolen in zip(repeats, (1.0, 31.0, 2.0, 60.0), strict=True):
        r.measured = {"cpu_stolen_pct": stolen}
    record = {}
    combine(record, repeats, batch_size=8)
    assert [r["cpu_stolen_pct"] for r in record["repeats"]] == [1.0, 31.0, 2.0, 60.0]
    assert record["cpu_stolen_pct"] == 2.0 and record["cpu_stolen_pct_most"] == 31.0
    record = {}
    combine(record, repeats[:1] + [_repeat(1, [0.1, 0.1])], batch_size=8)
    assert record["cpu_stolen_pct_most"] == 1.0  # a process that could not read it says nothing
    record = {}
    combine(record, [_repeat(0, [0.1, 0.1])], batch_size=8)
    assert "cpu_stolen_pct_most" not in record


def test_a_repeat_that_did_not_end_ok_decides_the_outcome_and_keeps_its_step():
    repeats = [
        _repeat(0, [0.10, 0.10]),
        _repeat(1, [25.0], outcome="over_budget", reason="the first timed step took 25.0 s"),
    ]
    record = {}
    combine(record, repeats, batch_size=8)
    assert record["outcome"] == "over_budget"
    assert record["reason"] == "repeat 2: the first timed step took 25.0 s"
    assert record["repeats"][1]["ms_per_step"] == 25000.0


def test_a_cell_with_slow_outlier_steps_is_as_slow_as_its_mean_step_not_its_median():
    """3 steps in 100 1.5-3x slow: wall time follows the mean, 3.75% above the median."""
    slowdowns = [1.0] * 97 + [1.5, 2.25, 3.0]
    repeats = [
        _repeat(i, [0.1 * level * x for x in slowdowns])
        for i, level in enumerate([1.0, 1.02, 0.99])
    ]
    record = {"flops_per_step": 1e9}
    combine(record, repeats, batch_size=8)
    assert record["ms_per_step"] / record["ms_per_step_median"] == pytest.approx(1.0375)
    wall = [r.timed_wall_s / len(r.step_s) for r in repeats]  # each process's wall time a step
    assert record["ms_per_step"] == pytest.approx(1000 * statistics.geometric_mean(wall))
    assert record["images_per_sec"] == pytest.approx(8000 / record["ms_per_step"])
    assert record["achieved_tflops"] == pytest.approx(1e9 / (record["ms_per_step"] / 1000) / 1e12)


def test_timed_steps_count_steps_and_timed_samples_the_blocks_they_were_timed_in():
    repeats = [_repeat(i, [0.1] * 12) for i in range(3)]
    for r in repeats:
        r.steps_per_sample = 10  # device.gpu.block_steps: one sample per 10 steps
    record = {}
    combine(record, repeats, batch_size=8)
    assert record["timed_samples"] == 36 and record["timed_steps"] == 360


def test_each_layers_row_is_its_median_over_the_profiles_a_missing_one_counting_zero():
    def row(layer, cls, ms):
        return {"layer": layer, "layer_type": "Conv2D", "op_class": cls, "ms": ms, "ops": 1.0,
                "op_types": ["Conv2D"]}

    found = median_layers([
        [row("conv2d", "conv_forward", 10.0), row("conv2d", "cast", 1.0)],
        [row("conv2d", "conv_forward", 14.0)],
        [row("conv2d", "conv_forward", 12.0), row("conv2d", "cast", 3.0)],
    ])
    assert [(r["op_class"], r["ms"], r["ms_min"], r["ms_max"]) for r in found] == [
        ("conv_forward", 12.0, 10.0, 14.0), ("cast", 1.0, 0.0, 3.0)]
