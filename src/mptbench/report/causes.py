"""The measured causes behind a device's speedups: its calibrated peaks, its input pipeline
(per policy, and whether it ate a gain), how much of the peak the cells reached, and how well
the probe predicted their steps. Every sentence cites its figure and column."""

from __future__ import annotations

import pandas as pd

from mptbench.report.summary import baseline_name, compared, policies
from mptbench.report.thresholds import FAST_RATIO, INPUT_BOUND, PREDICTION_OFF
from mptbench.report.wording import batches, dtype_of, median, ratio, speedup_text


def peak_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    matmul, conv = median(rows, "matmul_peak_vs_float32"), median(rows, "conv_peak_vs_float32")
    if matmul is None:
        return None
    dtype = dtype_of(rows, policy)
    measured = f"calibrated {dtype} peak {ratio(matmul)} float32's for matmuls"
    if conv is not None:
        measured += f", {ratio(conv)} for convolution training steps"
    measured += "; matmul_peak_vs_float32, conv_peak_vs_float32"
    worst = min(matmul, conv if conv is not None else matmul)
    if worst < 1 / FAST_RATIO:
        return (
            f"{policy}: this device runs {dtype} slower than float32 ({measured}), "
            "so it cannot speed training up."
        )
    if max(matmul, conv or matmul) < FAST_RATIO:
        return f"{policy}: no fast {dtype} math on this device ({measured})."
    return f"{policy}: fast {dtype} math is there ({measured})."


def input_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    slowdown = median(rows, "input_bound_ratio")
    if slowdown is None:
        return None
    cited = (
        f"{slowdown:.2f}x its in-memory twin's step "
        f"(input_bound_ratio, median over batch {batches(rows)})"
    )
    if slowdown >= INPUT_BOUND:
        return (
            f"{policy} is input-bound: steps took {cited}; "
            "the input pipeline, not the math, set its pace."
        )
    return f"{policy} is not input-bound: steps took {cited}."


def input_ate_gain(rows: pd.DataFrame, policy: str) -> list[str]:
    """Where the compute-only speedup is clearly above the end-to-end one."""
    hit = rows[(rows["policy"] == policy) & rows["speedup_compute_ci_low"].notna()]
    hit = hit[hit["speedup_compute_ci_low"] > hit["speedup_ci_high"]]
    return [
        f"{policy} at batch {int(row['batch_size'])}: the input pipeline ate the gain — compute "
        f"only {speedup_text(row, 'speedup_compute', 'speedup_compute')} (speedup_compute), end "
        f"to end {speedup_text(row)} (speedup_vs_baseline)."
        for _, row in hit.sort_values("batch_size").iterrows()
    ]


def mfu_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    notes = rows["peak_note"].dropna()
    if not notes.empty:
        return f"{policy}: {notes.iloc[0]} (peak_note); recalibrate with larger sizes."
    mfu, compute = median(rows, "mfu"), median(rows, "mfu_compute")
    if mfu is None:
        return None
    text = (
        f"{policy} reached {100 * mfu:.1f}% of its calibrated peak end to end (mfu: "
        f"{median(rows, 'achieved_tflops'):.3g} TFLOP/s achieved, achieved_tflops, against a "
        f"FLOP-weighted peak of {median(rows, 'peak_tflops'):.3g} TFLOP/s, peak_tflops"
    )
    if compute is not None:
        text += f"), {100 * compute:.1f}% compute only (mfu_compute"
    return text + "; medians over its cells)."


def prediction_sentence(rows: pd.DataFrame) -> str | None:
    errors = rows[["policy", "batch_size", "prediction_error"]].dropna()
    if errors.empty:
        return None
    worst = errors.loc[errors["prediction_error"].abs().idxmax()]
    off = errors[errors["prediction_error"].abs() > PREDICTION_OFF]
    text = (
        f"The probe predicted {len(errors)} cells' steps within "
        f"{100 * errors['prediction_error'].abs().median():.0f}% (median |prediction_error|); "
        f"worst {100 * worst['prediction_error']:+.0f}% ({worst['policy']} at batch "
        f"{int(worst['batch_size'])})"
    )
    return text + (f", {len(off)} beyond ±{100 * PREDICTION_OFF:.0f}%." if len(off) else ".")


def why(rows: pd.DataFrame) -> list[str]:
    """The measured causes for one (variant, device); empty when nothing was measured.

    The calibrated peaks speak for every policy, also one whose cells never ran (a policy
    skipped as over budget is often one whose kernels are slow); the rest only for cells
    that ran.
    """
    others = compared(rows)
    sentences = [s for p in others if (s := peak_sentence(rows[rows["policy"] == p], p))]
    ok = rows[rows["outcome"] == "ok"]
    base = baseline_name(rows)
    for policy in policies(ok):
        mine = ok[ok["policy"] == policy]
        sentences += [s for s in (input_sentence(mine, policy), mfu_sentence(mine, policy)) if s]
        sentences += input_ate_gain(ok, policy) if policy != base else []
    prediction = prediction_sentence(rows)
    return sentences + ([prediction] if prediction else [])
