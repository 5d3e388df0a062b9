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

from mptbench.report.summary import policies, speedup_range
from mptbench.train.outcomes import WORDS

INPUT_BOUND = 1.15  # a run this much slower than its in-memory twin waits for input
FAST_RATIO = 1.3  # a dtype peak this much above float32's counts as fast math
LOW_MFU = 0.15  # below this share of the peak, math is not what takes the time


def _median(rows: pd.DataFrame, column: str) -> float | None:
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(values.median()) if not values.empty else None


def _ratio(value: float) -> str:
    """0.93x, 3.07x; a tiny ratio keeps one significant digit (0.003x) rather than 0.00x."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.1g}x"


def _dtype(rows: pd.DataFrame, policy: str) -> str:
    dtypes = rows.loc[rows["policy"] == policy, "compute_dtype"].dropna()
    return str(dtypes.iloc[0]) if not dtypes.empty else "unknown"


def _batches(rows: pd.DataFrame) -> str:
    return ", ".join(str(int(b)) for b in sorted(set(rows["batch_size"])))


def _has(row: pd.Series, key: str, what: str) -> str:
    value = row[key]
    if value is None or pd.isna(value):
        return f"unknown {what}"
    return what if bool(value) else f"no {what}"


def hardware_sentence(row: pd.Series) -> str:
    if all(row[k] is None or pd.isna(row[k]) for k in ("device_name", "fast_float16", "cpu_flags")):
        return f"No hardware fingerprint was recorded for {row['device']}."
    name = row["device_name"] if pd.notna(row["device_name"]) else row["device"]
    if pd.notna(row["compute_capability"]):
        return (
            f"{name} (compute capability {row['compute_capability']:.1f}) has "
            f"{_has(row, 'fast_float16', 'float16 Tensor Cores')} (7.0 or higher) and "
            f"{_has(row, 'fast_bfloat16', 'bfloat16 Tensor Cores')} (8.0 or higher)."
        )
    flags = row["cpu_flags"] if isinstance(row["cpu_flags"], str) else "none recorded"
    # TensorFlow's CPU kernels reach fast float16 only through oneDNN on AMX-FP16, and fast
    # bfloat16 through oneDNN on AMX-BF16 or AVX512_BF16 (AVX512_FP16 alone is not used).
    return (
        f"{name} has {_has(row, 'fast_float16', 'fast float16 math')} (AMX-FP16) and "
        f"{_has(row, 'fast_bfloat16', 'fast bfloat16 math')} (AMX-BF16 or AVX512_BF16) "
        f"for TensorFlow; CPU flags recorded: {flags}."
    )


def _slow_hardware_sentence(rows: pd.DataFrame, policy: str, median: float) -> str | None:
    first = rows.iloc[0]
    dtype = _dtype(rows, policy)
    # Only a recorded "no" counts: without a fingerprint the hardware is unknown.
    fast = first.get(f"fast_{dtype}")
    fast = True if fast is None or pd.isna(fast) else bool(fast)
    if median >= 1 or fast:
        return None
    if pd.isna(first["compute_capability"]):
        return (
            f"This CPU gives TensorFlow no fast {dtype} math, and {policy} ran slower than "
            "float32, as TensorFlow's mixed-precision guide warns for CPUs: on a CPU only "
            "AMX (bfloat16, and float16 with AMX-FP16) speeds mixed precision up."
        )
    return (
        f"This GPU has no {dtype} Tensor Cores, so {policy}'s extra casts "
        "cost more than its reduced precision saves."
    )


def speedup_sentences(rows: pd.DataFrame, policy: str) -> list[str]:
    speedups = speedup_range(rows, policy)
    if speedups.empty:
        has_float32 = (rows["policy"] == "float32").any()
        missing = "float32 and it never both ran ok" if has_float32 else "no float32 run to compare"
        return [f"{policy}: no speedup to report ({missing} at any batch size)."]
    median = speedups.median()
    verdict = "faster than" if median > 1 else "slower than" if median < 1 else "as fast as"
    where = f"at batch size {int(speedups.index[0])}"
    if len(speedups) > 1:
        where = (
            f"across batch sizes {', '.join(str(int(b)) for b in speedups.index)} "
            f"(range {speedups.min():.2f}×–{speedups.max():.2f}×)"
        )
    sentences = [
        f"{policy}: median speedup {median:.2f}× over float32 {where}, so {verdict} float32 here."
    ]
    slow = _slow_hardware_sentence(rows, policy, median)
    return sentences + ([slow] if slow else [])


def outcome_sentences(rows: pd.DataFrame) -> list[str]:
    sentences = []
    for outcome in ("oom", "over_budget", "nonfinite", "unsupported"):
        hit = rows[rows["outcome"] == outcome]
        if not hit.empty:
            cells = "; ".join(f"{p} at batch {_batches(g)}" for p, g in hit.groupby("policy"))
            word = WORDS[outcome]
            sentences.append(f"{word[0].upper()}{word[1:]}: {cells}.")
    return sentences


def memory_sentences(rows: pd.DataFrame) -> list[str]:
    f32_oom = set(rows[(rows["policy"] == "float32") & (rows["outcome"] == "oom")]["batch_size"])
    sentences = []
    for policy in policies(rows):
        ok = rows[(rows["policy"] == policy) & (rows["outcome"] == "ok")]
        fit = ok[ok["batch_size"].isin(f32_oom)]
        if policy != "float32" and not fit.empty:
            sentences.append(
                f"{policy} fit batch {_batches(fit)}, where float32 ran out of memory."
            )
    return sentences


def peak_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    matmul, conv = _median(rows, "matmul_peak_vs_float32"), _median(rows, "conv_peak_vs_float32")
    if matmul is None:
        return None
    dtype = _dtype(rows, policy)
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
        return f"{text}: held back by the slow {_dtype(rows, policy)} convolution kernels."
    if mfu < LOW_MFU:
        return (
            f"{text}: most of each step is spent outside matmuls and convolutions (memory-bound "
            "BatchNorm and activations, small layers, runtime overhead), which faster math "
            "does not shorten."
        )
    return f"{text}: compute-bound."


def why(rows: pd.DataFrame) -> list[str]:
    """The measured causes for one (variant, device); empty when nothing was measured.

    The measured peaks speak for every policy, also one whose cells never ran (a policy
    skipped as over budget is often one whose kernels are slow); the twin and MFU only for
    cells that ran.
    """
    mixed = [p for p in policies(rows) if p != "float32"]
    sentences = [s for p in mixed if (s := peak_sentence(rows[rows["policy"] == p], p))]
    ok = rows[rows["outcome"] == "ok"]
    if ok.empty:
        return sentences
    sentences += [s for s in [input_sentence(ok)] if s]
    for policy in policies(ok):
        sentence = mfu_sentence(ok[ok["policy"] == policy], policy)
        sentences += [sentence] if sentence else []
    return sentences


def diagnose(rows: pd.DataFrame) -> list[str]:
    """Sentences about one (variant, device), every number taken from its rows."""
    sentences = [hardware_sentence(rows.iloc[0])]
    for policy in policies(rows):
        if policy != "float32":
            sentences += speedup_sentences(rows, policy)
    return sentences + outcome_sentences(rows) + why(rows) + memory_sentences(rows)
