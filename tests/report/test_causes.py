"""The measured causes: every sentence cites its figure and column; nothing unmeasured."""

import pandas as pd
import pytest
from records import summary_row

from mptbench.report.causes import prediction_sentence, why


def _rows(**columns):
    """Summary rows of float32 at batch 32, a list giving each row its own value."""
    n = max(len(v) for v in columns.values() if isinstance(v, list))
    columns = {"batch_size": 32} | columns
    return pd.DataFrame([
        summary_row(**{k: v[i] if isinstance(v, list) else v for k, v in columns.items()})
        for i in range(n)
    ])


def said(sentences: list[str], opening: str, *shown: str) -> str:
    """The one sentence of `sentences` that opens with `opening` (its subject and verdict),
    checked to show each of `shown` (its figures and the columns they come from)."""
    found = [s for s in sentences if s.startswith(opening)]
    assert len(found) == 1, (opening, sentences)
    missing = [x for x in shown if x not in found[0]]
    assert not missing, (missing, found[0])
    return found[0]


def test_slow_kernels_input_bound_per_policy_and_mfu_cite_their_columns():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        peak_vs_float32=[1.0, 0.02],
        matmul_peak_vs_float32=[1.0, 0.93],
        conv_peak_vs_float32=[1.0, 0.015],
        conv_flops_per_step=999e9,
        matmul_flops_per_step=1e9,
        input_bound_ratio=[1.02, 1.5],
        input_bound_ratio_ci_low=[0.99, 1.3],
        input_bound_ratio_ci_high=[1.05, 1.7],
        mfu=[0.41, 0.006],
        mfu_compute=[0.43, 0.009],
        achieved_tflops=[0.047, 0.0006],
        peak_tflops=[0.115, 0.1],
    )
    sentences = why(rows)
    said(sentences, "mixed_float16: this device ran float16 slower than float32", "0.02x",
         "99.9%", "matmuls 0.93x", "0.01x", "matmul_peak_vs_float32")
    said(sentences, "float32: not input-bound at batch 32", "1.02x", "input_bound_ratio")
    said(sentences, "mixed_float16: input-bound at batch 32", "1.50x", "1.30–1.70",
         "input_bound_ratio")
    said(sentences, "float32 reached 41.0% of its calibrated peak", "0.047", "0.115", "43.0%",
         "mfu", "peak_tflops")
    assert "cannot" not in " ".join(sentences)


def test_a_dtype_is_judged_on_the_models_own_mix_of_work():
    """0.70x for matmuls and 2.50x for convolutions: a model that is 99.9% convolution is
    judged on its convolutions (the weighted 2.49x), not on the worse of the two."""
    rows = _rows(policy=["float32", "mixed_bfloat16"], peak_vs_float32=[1.0, 2.49],
                 matmul_peak_vs_float32=[1.0, 0.70], conv_peak_vs_float32=[1.0, 2.50],
                 conv_flops_per_step=999e9, matmul_flops_per_step=1e9)
    said(why(rows), "mixed_bfloat16: fast bfloat16 math is there", "2.49x")
    assert "slower" not in " ".join(why(rows))


@pytest.mark.parametrize(
    ("weighted", "said"),
    [
        (0.76, "ran bfloat16 slower than float32 here"),  # below 1 / 1.3 = 0.769
        (0.78, "no fast bfloat16 math for this model"),
        (1.29, "no fast bfloat16 math for this model"),
        (1.31, "fast bfloat16 math is there for this model"),
    ],
)
def test_the_peak_sentence_on_either_side_of_its_thresholds(weighted, said):
    rows = _rows(policy=["float32", "mixed_bfloat16"], peak_vs_float32=[1.0, weighted],
                 matmul_peak_vs_float32=[1.0, weighted], conv_peak_vs_float32=[1.0, weighted],
                 conv_flops_per_step=1e9, matmul_flops_per_step=1e9)
    assert f"mixed_bfloat16: this device {said}" in " ".join(why(rows)) or (
        f"mixed_bfloat16: {said}" in " ".join(why(rows))
    )


@pytest.mark.parametrize(
    ("value", "low", "high", "said"),
    [
        (1.20, 1.05, 1.35, "input-bound"),  # at least 1.15, the whole interval above 1
        (1.16, 0.99, 1.33, "unclear"),  # the interval holds 1
        (1.14, 1.01, 1.20, "unclear"),  # the interval holds 1.15
        (1.05, 0.98, 1.14, "not input-bound"),  # the whole interval below 1.15
        (1.30, None, None, "unclear"),  # one process: no interval
    ],
)
def test_input_bound_needs_an_interval_on_either_side_of_its_threshold(value, low, high, said):
    rows = _rows(policy=["float32"], input_bound_ratio=[value], input_bound_ratio_ci_low=[low],
                 input_bound_ratio_ci_high=[high])
    assert f"float32: {said} at batch 32 ({value:.2f}x its" in " ".join(why(rows))


@pytest.mark.parametrize(("most", "said"), [(1.06, "not input-bound"), (1.30, "unclear")])
def test_without_a_twin_the_input_pipelines_own_cost_bounds_the_ratio(most, said):
    rows = _rows(policy=["float32"], input_bound_ratio_most=[most], input_ms_per_batch=[40.0],
                 input_cpu_ms_per_batch=[47.5], synthetic_ms_per_step=None, input_bound_ratio=None)
    sentence = next(s for s in why(rows) if s.startswith(f"float32: {said} at batch 32"))
    for shown in (f"{most:.2f}x", "40.0 ms", "47.5 ms of CPU", "no twin", "input_bound_ratio_most"):
        assert shown in sentence, sentence


def test_the_mfu_sentence_takes_its_three_figures_from_one_cell():
    rows = _rows(policy=["float32"] * 3, batch_size=[8, 16, 32], mfu=[0.2, 0.6, 0.4],
                 achieved_tflops=[1.0, 3.0, 2.0], peak_tflops=[5.0, 5.0, 5.0], mfu_compute=None)
    said(why(rows), "float32 reached 40.0% of its calibrated peak", "batch 32", "2 TFLOP/s",
         "5 TFLOP/s", "median of its 3 cells")


def test_no_cause_is_stated_that_was_not_measured():
    rows = _rows(policy=["float32", "mixed_float16"], mfu=[0.05, 0.01], achieved_tflops=[1, 1],
                 peak_tflops=[20, 100], input_bound_ratio=[1.0, 1.0])
    text = " ".join(why(rows)).lower()
    for unmeasured in ("batchnorm", "memory-bound", "overhead", "every policy waits"):
        assert unmeasured not in text


def test_a_fast_compute_bound_device():
    rows = _rows(
        policy=["float32", "mixed_bfloat16"],
        peak_vs_float32=[1.0, 6.0],
        matmul_peak_vs_float32=[1.0, 7.5],
        conv_peak_vs_float32=[1.0, 5.0],
        input_bound_ratio=[1.02, 1.05],
        input_bound_ratio_ci_low=[1.0, 1.01],
        input_bound_ratio_ci_high=[1.04, 1.09],
    )
    sentences = why(rows)
    said(sentences, "mixed_bfloat16: fast bfloat16 math is there", "6.00x")
    said(sentences, "mixed_bfloat16: not input-bound at batch 32", "1.05x")
    assert why(_rows(policy=["float32"], outcome=["oom"])) == []


def test_a_policy_that_never_ran_is_still_explained_by_its_peak():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        outcome=["ok", "over_budget"],
        peak_vs_float32=[1.0, 0.004],
        matmul_peak_vs_float32=[1.0, 0.65],
        conv_peak_vs_float32=[1.0, 0.003],
    )
    said(why(rows), "mixed_float16: this device ran float16 slower than float32", "0.65x",
         "0.003x")


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
    sentences = why(rows)
    said(sentences, "mixed_bfloat16 at batch 64: the input pipeline ate the gain", "1.85×",
         "1.80–1.90", "speedup_compute", "1.02×", "0.97–1.06", "speedup_vs_baseline")
    # The intervals overlap at batch 128.
    assert not [s for s in sentences if s.startswith("mixed_bfloat16 at batch 128")]


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
                 prediction_error=[0.05, -0.1, 0.6])
    said(why(rows), "The probe predicted 3 cells' steps within 10%", "prediction_error",
         "+60% (float32 at batch 128)", "1 beyond ±30%")


@pytest.mark.parametrize("cells, said", [(1, "The probe predicted 1 cell's steps within"),
                                          (2, "The probe predicted 2 cells' steps within")])
def test_the_prediction_sentence_counts_its_cells_in_words(cells, said):
    rows = pd.DataFrame([summary_row(batch_size=8 * (i + 1), prediction_error=0.1)
                         for i in range(cells)])
    assert prediction_sentence(rows).startswith(said)
