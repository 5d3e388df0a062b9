"""The measured causes behind a device's speedups: its calibrated peaks (weighted by the model's
own mix of convolution and matmul FLOPs), its input pipeline (per policy and batch size, on an
interval, and whether it ate a gain), how much of the peak the cells reached, and how well the
probe predicted their steps. Every sentence cites its figures and columns, and says what was
measured here, never what cannot be."""

from __future__ import annotations

import pandas as pd

from mptbench.core.outcomes import Outcome
from mptbench.core.record import PREDICTION_TOLERANCE as PREDICTION_OFF
from mptbench.report.summary import baseline_name, compared, policies
from mptbench.report.thresholds import FAST_RATIO, INPUT_BOUND
from mptbench.report.wording import dtype_of, median, ratio, speedup_text


def _conv_share(rows: pd.DataFrame) -> float | None:
    conv, matmul = median(rows, "conv_flops_per_step"), median(rows, "matmul_flops_per_step")
    if conv is None or matmul is None or conv + matmul == 0:
        return None
    return conv / (conv + matmul)


def peak_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    """The policy's dtype against float32 at the calibrated peaks, for this model's own mix of
    convolution and matmul work (a model that is all convolution is judged on convolution)."""
    weighted = median(rows, "peak_vs_float32")
    matmul, conv = median(rows, "matmul_peak_vs_float32"), median(rows, "conv_peak_vs_float32")
    if weighted is None:
        return None
    dtype, share = dtype_of(rows, policy), _conv_share(rows)
    mix = f"{100 * share:.1f}% of its FLOPs convolution" if share is not None else "its FLOPs"
    parts = [f"matmuls {ratio(matmul)}" if matmul is not None else None,
             f"convolution training steps {ratio(conv)}" if conv is not None else None]
    measured = (
        f"calibrated {dtype} peak {ratio(weighted)} float32's for this model's work ({mix}; "
        f"peak_vs_float32; {', '.join(p for p in parts if p)}: matmul_peak_vs_float32, "
        "conv_peak_vs_float32)"
    )
    if weighted < 1 / FAST_RATIO:
        return (
            f"{policy}: this device ran {dtype} slower than float32 here ({measured}): its "
            f"peak gave {policy} nothing to gain on this device and build."
        )
    if weighted < FAST_RATIO:
        return f"{policy}: no fast {dtype} math for this model on this device ({measured})."
    return f"{policy}: fast {dtype} math is there for this model ({measured})."


def _bound(row: pd.Series) -> str:
    """input-bound, not input-bound, or unclear, on the ratio's interval (or, where no twin
    ran, on the most the input pipeline's own cost allows)."""
    value, low, high = (row.get(f"input_bound_ratio{s}") for s in ("", "_ci_low", "_ci_high"))
    if pd.isna(value) and pd.notna(row.get("input_bound_ratio_most")):
        return "not input-bound" if row["input_bound_ratio_most"] < INPUT_BOUND else "unclear"
    if pd.isna(low) or pd.isna(high):
        return "unclear"
    if low > 1 and value >= INPUT_BOUND:
        return "input-bound"
    if high < INPUT_BOUND:
        return "not input-bound"
    return "unclear"


def _input_figure(row: pd.Series) -> str:
    if pd.isna(row.get("input_bound_ratio")):
        return (f"at most {row['input_bound_ratio_most']:.2f}x its compute: the input pipeline "
                f"alone took {row['input_ms_per_batch']:.1f} ms per batch, "
                f"{row['input_cpu_ms_per_batch']:.1f} ms of CPU; no twin ran")
    figure = f"{row['input_bound_ratio']:.2f}x its in-memory twin's step"
    if pd.notna(row["input_bound_ratio_ci_low"]):
        figure += (f", 95% interval {row['input_bound_ratio_ci_low']:.2f}–"
                   f"{row['input_bound_ratio_ci_high']:.2f}")
    return figure


def input_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    """Per batch size: input-bound only where the step over its twin's is at least
    INPUT_BOUND and its whole interval is above 1; not input-bound only where the interval is
    below INPUT_BOUND, or where no twin ran because the input pipeline's own cost per batch
    could not make the step INPUT_BOUND times its compute; otherwise the interval holds both
    and the report says so."""
    measured = rows["input_bound_ratio"].notna()
    if "input_bound_ratio_most" in rows:
        measured |= rows["input_bound_ratio_most"].notna()
    hit = rows[measured].sort_values("batch_size")
    if hit.empty:
        return None
    parts = [f"{_bound(row)} at batch {int(row['batch_size'])} ({_input_figure(row)})"
             for _, row in hit.iterrows()]
    columns = "input_bound_ratio"
    if hit["input_bound_ratio"].isna().any():
        columns += ", input_bound_ratio_most"
    text = f"{policy}: " + "; ".join(parts) + f" ({columns})"
    if any(_bound(r) == "input-bound" for _, r in hit.iterrows()):
        text += "; where input-bound, the input pipeline, not the math, set its pace"
    return text + "."


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
    """The policy's median cell by MFU, its three figures from that one row (a median MFU
    beside a median achieved rate and a median peak need not agree)."""
    notes = rows["peak_note"].dropna()
    if not notes.empty:
        return f"{policy}: {notes.iloc[0]} (peak_note); recalibrate with larger sizes."
    hit = rows[rows["mfu"].notna()].sort_values("mfu")
    if hit.empty:
        return None
    row = hit.iloc[(len(hit) - 1) // 2]
    text = (
        f"{policy} reached {100 * row['mfu']:.1f}% of its calibrated peak end to end at batch "
        f"{int(row['batch_size'])} (mfu: {row['achieved_tflops']:.3g} TFLOP/s achieved, "
        f"achieved_tflops, against a FLOP-weighted peak of {row['peak_tflops']:.3g} TFLOP/s, "
        f"peak_tflops"
    )
    if pd.notna(row["mfu_compute"]):
        text += f"), {100 * row['mfu_compute']:.1f}% compute only (mfu_compute"
    of = f"the median of its {len(hit)} cells" if len(hit) > 1 else "its one cell"
    return text + f"; {of})."


def prediction_sentence(rows: pd.DataFrame) -> str | None:
    errors = rows[["policy", "batch_size", "prediction_error"]].dropna()
    if errors.empty:
        return None
    worst = errors.loc[errors["prediction_error"].abs().idxmax()]
    off = errors[errors["prediction_error"].abs() > PREDICTION_OFF]
    cells = "1 cell's" if len(errors) == 1 else f"{len(errors)} cells'"
    text = (
        f"The probe predicted {cells} steps within "
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
    ok = rows[rows["outcome"] == Outcome.OK]
    base = baseline_name(rows)
    for policy in policies(ok):
        mine = ok[ok["policy"] == policy]
        sentences += [s for s in (input_sentence(mine, policy), mfu_sentence(mine, policy)) if s]
        sentences += input_ate_gain(ok, policy) if policy != base else []
    prediction = prediction_sentence(rows)
    return sentences + ([prediction] if prediction else [])
