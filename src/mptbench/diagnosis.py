"""Why mixed precision did or did not help on one device: sentences built from measured figures.

Three measurements decide it, each recorded per cell:
- the device's measured peak for the policy's dtype against float32's (calibrate rule): no
  faster math, no faster training;
- the step time against the synthetic twin's (same model on in-memory data): a run well above
  it waits for its input pipeline, which no dtype can fix;
- model-FLOPs utilisation against the measured peak: a run far below the peak spends its time
  outside matmuls and convolutions (small layers, memory-bound BatchNorm and activations,
  runtime overhead), which faster math does not shorten.
"""

from __future__ import annotations

import pandas as pd

INPUT_BOUND = 1.15  # a run this much slower than its in-memory twin waits for input
FAST_RATIO = 1.3  # a dtype peak this much above float32's counts as fast math
LOW_MFU = 0.15  # below this share of the peak, math is not what takes the time
DTYPE = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


def _median(rows: pd.DataFrame, column: str) -> float | None:
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(values.median()) if not values.empty else None


def _ratio(value: float) -> str:
    """0.93x, 3.07x; a tiny ratio keeps one significant digit (0.003x) rather than 0.00x."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.1g}x"


def peak_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    matmul, conv = _median(rows, "matmul_peak_vs_float32"), _median(rows, "conv_peak_vs_float32")
    if matmul is None:
        return None
    dtype = DTYPE.get(policy, policy)
    measured = f"{dtype} peak {_ratio(matmul)} float32 for matmuls"
    if conv is not None:
        measured += f", {_ratio(conv)} for convolution training steps"
    worst = min(matmul, conv if conv is not None else matmul)
    if worst < 1 / FAST_RATIO:
        return (
            f"{policy}: this device has slow {dtype} kernels ({measured}), "
            "so it cannot speed training up."
        )
    if max(matmul, conv or matmul) < FAST_RATIO:
        return f"{policy}: no fast {dtype} math on this device ({measured})."
    return f"{policy}: fast {dtype} math is there ({measured})."


def input_sentence(rows: pd.DataFrame) -> str | None:
    ratio = _median(rows, "input_bound_ratio")
    if ratio is None:
        return None
    if ratio >= INPUT_BOUND:
        return (
            f"Input-bound: steps took {ratio:.2f}x as long as on in-memory data (median), so the "
            "input pipeline, not the math, set the pace; every policy waits for it alike."
        )
    return f"Not input-bound: steps took {ratio:.2f}x the in-memory twin's time (median)."


def mfu_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    mfu = _median(rows, "mfu")
    if mfu is None:
        return None
    achieved = _median(rows, "achieved_tflops")
    text = f"{policy} reached {100 * mfu:.1f}% of its measured matmul peak ({achieved:.3g} TFLOP/s)"
    conv = _median(rows, "conv_peak_vs_float32")
    if mfu < LOW_MFU and conv is not None and conv < 1 / FAST_RATIO:
        return f"{text}: held back by the slow {DTYPE.get(policy, policy)} convolution kernels."
    if mfu < LOW_MFU:
        return (
            f"{text}: most of each step is spent outside matmuls and convolutions (memory-bound "
            "BatchNorm and activations, small layers, runtime overhead), which faster math "
            "does not shorten."
        )
    return f"{text}: compute-bound."


def why(rows: pd.DataFrame) -> list[str]:
    """The diagnosis sentences for one (variant, device); empty when nothing was measured.

    The measured peaks speak for every policy, also one whose cells never ran (a policy
    skipped as over budget is often one whose kernels are slow); the twin and MFU only for
    cells that ran.
    """
    sentences = []
    for policy in [p for p in DTYPE if p != "float32" and p in set(rows["policy"])]:
        sentence = peak_sentence(rows[rows["policy"] == policy], policy)
        if sentence:
            sentences.append(sentence)
    ok = rows[rows["outcome"] == "ok"]
    if ok.empty:
        return sentences
    sentence = input_sentence(ok)
    if sentence:
        sentences.append(sentence)
    for policy in [p for p in DTYPE if p in set(ok["policy"])]:
        sentence = mfu_sentence(ok[ok["policy"] == policy], policy)
        if sentence:
            sentences.append(sentence)
    return sentences
