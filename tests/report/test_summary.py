"""The peak a cell is held to, its MFU, and the speedup intervals drawn from raw steps."""

import pytest

from mptbench.report.summary import peaks, summarise, verdict

CALIBRATION = {
    "matmul": {"float32": {"tflops": 2.0}, "bfloat16": {"tflops": 6.0}},
    "conv": {"float32": {"tflops": 1.0}, "bfloat16": {"tflops": 2.5}},
    "matmul_vs_float32": {"float32": 1.0, "bfloat16": 3.0},
    "conv_vs_float32": {"float32": 1.0, "bfloat16": 2.5},
}


def test_the_peak_weighs_conv_flops_at_the_conv_peak_and_dense_at_the_matmul_peak():
    row = {"conv_flops_per_step": 3e12, "matmul_flops_per_step": 1e12, "achieved_tflops": 0.8}
    out = peaks(CALIBRATION, "float32", row)
    # 3 TFLOP at 1 TFLOP/s and 1 TFLOP at 2 TFLOP/s: 4 TFLOP in 3.5 s.
    assert out["peak_tflops"] == pytest.approx(4 / 3.5)
    assert out["mfu"] == pytest.approx(0.8 / (4 / 3.5))
    assert out["conv_peak_vs_float32"] == 1.0
    assert peaks(CALIBRATION, "bfloat16", row)["peak_tflops"] == pytest.approx(
        4 / (3 / 2.5 + 1 / 6)
    )
    assert peaks(CALIBRATION, "unknown", row) == {}


def test_a_cell_above_its_peak_gets_no_mfu_but_a_note():
    row = {"conv_flops_per_step": 1e12, "matmul_flops_per_step": 0, "achieved_tflops": 0.9,
           "achieved_tflops_compute": 1.4}  # fmt: skip
    out = peaks(CALIBRATION, "float32", row)
    assert out["mfu"] is None and out["mfu_compute"] is None
    assert out["peak_note"].startswith("calibration too low: this cell reached 1.4 TFLOP/s")


def _record(policy, batch_size, steps, twin=None, dtype=None):
    return {
        "device": "cpu", "variant": "pypi", "policy": policy, "batch_size": batch_size,
        "outcome": "ok", "ms_per_step": sorted(steps)[len(steps) // 2],
        "synthetic_ms_per_step": sorted(twin)[len(twin) // 2] if twin else None,
        "config": {"policy": {"compute_dtype": dtype or "float32"}},
        "repeats": [{"step_ms": steps, "synthetic_step_ms": twin or []}],
    }  # fmt: skip


def test_speedups_come_with_intervals_end_to_end_and_compute_only():
    base = [100.0 + d for d in range(-5, 6)]
    half, third = [x / 2 for x in base], [x / 3 for x in base]
    records = [
        _record("float32", 8, base, twin=base),
        _record("mixed_bfloat16", 8, half, twin=third, dtype="bfloat16"),
    ]
    summary = summarise(records).set_index("policy")
    row = summary.loc["mixed_bfloat16"]
    assert row["speedup_vs_baseline"] == pytest.approx(2.0)
    assert row["speedup_ci_low"] < 2.0 < row["speedup_ci_high"]
    assert row["speedup_verdict"] == "faster"
    assert row["speedup_compute"] == pytest.approx(3.0)
    assert row["speedup_compute_ci_low"] > row["speedup_ci_high"]
    assert summary.loc["float32", "speedup_vs_baseline"] == 1.0


def test_verdicts():
    assert verdict(1.01, 1.2) == "faster"
    assert verdict(0.8, 0.99) == "slower"
    assert verdict(0.95, 1.05) == "no measurable difference"
