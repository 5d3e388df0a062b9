"""The diagnosis: sentences built from measured figures, for a policy's own dtype."""

import pandas as pd

from mptbench.report.diagnosis import why

DTYPES = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


def _rows(**columns):
    base = {"outcome": "ok", "policy": "float32"}
    n = max(len(v) for v in columns.values() if isinstance(v, list))
    data = {k: v if isinstance(v, list) else [v] * n for k, v in {**base, **columns}.items()}
    data["compute_dtype"] = [DTYPES[p] for p in data["policy"]]
    return pd.DataFrame(data)


def test_diagnosis_names_slow_kernels_input_bound_and_low_mfu():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        matmul_peak_vs_float32=[1.0, 0.93],
        conv_peak_vs_float32=[1.0, 0.015],
        input_bound_ratio=[1.4, 1.5],
        mfu=[0.41, 0.006],
        achieved_tflops=[0.047, 0.0006],
    )
    text = " ".join(why(rows))
    assert "slow float16 kernels (float16 peak 0.93x float32 for matmuls, 0.01x" in text
    assert "Input-bound: steps took 1.45x" in text
    assert "float32 reached 41.0% of its measured matmul peak" in text
    assert "held back by the slow float16 convolution kernels" in text


def test_diagnosis_of_a_fast_compute_bound_device():
    rows = _rows(
        policy=["float32", "mixed_bfloat16"],
        matmul_peak_vs_float32=[1.0, 7.5],
        conv_peak_vs_float32=[1.0, 5.0],
        input_bound_ratio=[1.02, 1.05],
        mfu=[0.55, 0.6],
        achieved_tflops=[30.0, 250.0],
    )
    text = " ".join(why(rows))
    assert "fast bfloat16 math is there (bfloat16 peak 7.50x float32" in text
    assert "Not input-bound" in text
    assert "compute-bound" in text
    assert why(_rows(policy=["float32"], outcome=["oom"])) == []


def test_diagnosis_explains_a_policy_that_never_ran():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        outcome=["ok", "over_budget"],
        matmul_peak_vs_float32=[1.0, 0.65],
        conv_peak_vs_float32=[1.0, 0.003],
        input_bound_ratio=[1.0, None],
        mfu=[0.5, None],
        achieved_tflops=[0.1, None],
    )
    text = " ".join(why(rows))
    assert "mixed_float16: this device has slow float16 kernels" in text
    assert "float16 peak 0.65x float32 for matmuls, 0.003x for convolution training" in text
