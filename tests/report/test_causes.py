"""The measured causes: every sentence cites its figure and column; nothing unmeasured."""

import pandas as pd

from mptbench.core.record import COLUMNS
from mptbench.report.causes import why

DTYPES = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


def _rows(**columns):
    n = max(len(v) for v in columns.values() if isinstance(v, list))
    base = {"outcome": "ok", "policy": "float32", "batch_size": 32}
    data = {k: v if isinstance(v, list) else [v] * n for k, v in {**base, **columns}.items()}
    data["compute_dtype"] = [DTYPES[p] for p in data["policy"]]
    frame = pd.DataFrame(data)
    return frame.reindex(columns=list(dict.fromkeys([*COLUMNS, *frame.columns])))


def test_slow_kernels_input_bound_per_policy_and_mfu_cite_their_columns():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        matmul_peak_vs_float32=[1.0, 0.93],
        conv_peak_vs_float32=[1.0, 0.015],
        input_bound_ratio=[1.02, 1.5],
        mfu=[0.41, 0.006],
        mfu_compute=[0.43, 0.009],
        achieved_tflops=[0.047, 0.0006],
        peak_tflops=[0.115, 0.1],
    )
    text = " ".join(why(rows))
    assert "mixed_float16: this device runs float16 slower than float32" in text
    assert "0.93x float32's for matmuls, 0.01x for convolution training steps" in text
    assert "matmul_peak_vs_float32, conv_peak_vs_float32" in text
    assert "float32 is not input-bound: steps took 1.02x" in text
    assert "mixed_float16 is input-bound: steps took 1.50x" in text
    assert "(input_bound_ratio, median over batch 32)" in text
    assert "float32 reached 41.0% of its calibrated peak end to end (mfu: 0.047 TFLOP/s" in text
    assert "against a FLOP-weighted peak of 0.115 TFLOP/s, peak_tflops), 43.0% compute only" in text


def test_no_cause_is_stated_that_was_not_measured():
    rows = _rows(policy=["float32", "mixed_float16"], mfu=[0.05, 0.01], achieved_tflops=[1, 1],
                 peak_tflops=[20, 100], input_bound_ratio=[1.0, 1.0])  # fmt: skip
    text = " ".join(why(rows)).lower()
    for unmeasured in ("batchnorm", "memory-bound", "overhead", "every policy waits"):
        assert unmeasured not in text


def test_a_fast_compute_bound_device():
    rows = _rows(
        policy=["float32", "mixed_bfloat16"],
        matmul_peak_vs_float32=[1.0, 7.5],
        conv_peak_vs_float32=[1.0, 5.0],
        input_bound_ratio=[1.02, 1.05],
    )
    text = " ".join(why(rows))
    assert "fast bfloat16 math is there (calibrated bfloat16 peak 7.50x float32's" in text
    assert "mixed_bfloat16 is not input-bound" in text
    assert why(_rows(policy=["float32"], outcome=["oom"])) == []


def test_a_policy_that_never_ran_is_still_explained_by_its_peak():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        outcome=["ok", "over_budget"],
        matmul_peak_vs_float32=[1.0, 0.65],
        conv_peak_vs_float32=[1.0, 0.003],
    )
    text = " ".join(why(rows))
    assert "mixed_float16: this device runs float16 slower than float32" in text
    assert "0.65x float32's for matmuls, 0.003x for convolution training" in text


def test_the_input_pipeline_eating_the_gain_is_named_with_both_speedups():
    rows = _rows(
        policy=["float32", "mixed_bfloat16", "mixed_bfloat16"],
        batch_size=[64, 64, 128],
        speedup_vs_baseline=[1.0, 1.02, 1.6],
        speedup_ci_low=[None, 0.97, 1.5],
        speedup_ci_high=[None, 1.06, 1.7],
        speedup_compute=[None, 1.85, 1.65],
        speedup_compute_ci_low=[None, 1.80, 1.55],
        speedup_compute_ci_high=[None, 1.90, 1.75],
    )
    text = " ".join(why(rows))
    assert (
        "mixed_bfloat16 at batch 64: the input pipeline ate the gain — compute only 1.85× "
        "(95% interval 1.80–1.90) (speedup_compute), end to end 1.02× (95% interval "
        "0.97–1.06) (speedup_vs_baseline)."
    ) in text
    assert "batch 128: the input pipeline" not in text  # the intervals overlap there


def test_a_peak_below_what_a_cell_reached_gives_no_mfu():
    note = (
        "calibration too low: this cell reached 1.2 TFLOP/s, above the calibrated peak of 1 TFLOP/s"
    )
    rows = _rows(policy=["float32"], peak_note=[note], mfu=[None])
    text = " ".join(why(rows))
    assert f"float32: {note} (peak_note)" in text
    assert "% of its calibrated peak" not in text


def test_the_probes_predictions_are_judged():
    rows = _rows(policy=["float32"] * 3, batch_size=[32, 64, 128],
                 prediction_error=[0.05, -0.1, 0.6])  # fmt: skip
    text = " ".join(why(rows))
    assert "The probe predicted 3 cells' steps within 10% (median |prediction_error|)" in text
    assert "worst +60% (float32 at batch 128), 1 beyond ±30%." in text
