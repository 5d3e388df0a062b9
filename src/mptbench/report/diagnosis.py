"""Why mixed precision did or did not help on one device: sentences built from measured figures,
each citing the figure and the summary.csv column it stands on.

What is measured, per cell: the speedup over the baseline policy with its interval (end to end,
and compute only on the synthetic twins); the device's calibrated peak per dtype against
float32's; the step against its twin's (input-bound or not, per policy); achieved FLOP rates
against the calibrated peak (MFU); the probe's prediction against the measured step.
Thresholds live in report/thresholds.py.
"""

from __future__ import annotations

import pandas as pd

from mptbench.core import frameworks
from mptbench.core.outcomes import WORDS, Outcome
from mptbench.core.stats import Verdict
from mptbench.report.causes import why
from mptbench.report.summary import baseline_name, compared, is_baseline
from mptbench.report.thresholds import STOLEN_NOTABLE
from mptbench.report.wording import batches, dtype_of, speedup_text


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
    backend = row.get("backend")
    backend = backend if isinstance(backend, str) else frameworks.DEFAULT.name
    if not frameworks.framework(backend).says_its_build:
        # What the CPU flags give another framework's compiler is not known in advance: the
        # calibrated peaks (the next lines) measure it.
        return (
            f"{name} (cpu_flags: {flags}) on {backend}: which of these its CPU kernels use "
            f"shows in {backend}'s calibrated peaks."
        )
    # TensorFlow's CPU kernels reach fast float16 only through oneDNN on AMX-FP16, and fast
    # bfloat16 through oneDNN on AMX-BF16 or AVX512_BF16 (AVX512_FP16 alone is not used).
    return (
        f"{name} has {_has(row, 'fast_float16', 'fast float16 math')} (AMX-FP16) and "
        f"{_has(row, 'fast_bfloat16', 'fast bfloat16 math')} (AMX-BF16 or AVX512_BF16) "
        f"for TensorFlow, from its CPU flags (cpu_flags: {flags})."
    )


def speedup_sentence(rows: pd.DataFrame, policy: str) -> str:
    hit = rows[(rows["policy"] == policy) & rows["speedup_vs_baseline"].notna()]
    base = baseline_name(rows)
    if hit.empty:
        missing = (
            f"{base} and it never both ran ok" if base else "no baseline policy run to compare"
        )
        return f"{policy}: no speedup to report ({missing} at any batch size)."
    parts = []
    for _, row in hit.sort_values("batch_size").iterrows():
        verdict = row["speedup_verdict"] if isinstance(row["speedup_verdict"], str) else "unjudged"
        parts.append(f"batch {int(row['batch_size'])}: {verdict}, {speedup_text(row)}")
    return f"{policy} against {base} (speedup_vs_baseline) — " + "; ".join(parts) + "."


def _slow_hardware_sentence(rows: pd.DataFrame, policy: str) -> str | None:
    first, dtype = rows.iloc[0], dtype_of(rows, policy)
    # Only a recorded "no" counts: without a fingerprint the hardware is unknown.
    fast = first.get(f"fast_{dtype}")
    if fast is None or pd.isna(fast) or bool(fast):
        return None
    slower = rows[(rows["policy"] == policy) & (rows["speedup_verdict"] == Verdict.SLOWER)]
    if slower.empty:
        return None
    where = "This CPU" if pd.isna(first["compute_capability"]) else "This GPU"
    return (
        f"{where} has no fast {dtype} math (fast_{dtype} false) and {policy} was measurably "
        f"slower than {baseline_name(rows)} at batch {batches(slower)}, as TensorFlow's "
        "mixed-precision guide warns for such hardware."
    )


def outcome_sentences(rows: pd.DataFrame) -> list[str]:
    sentences = []
    said = (
        Outcome.OOM,
        Outcome.KILLED,
        Outcome.OVER_BUDGET,
        Outcome.NONFINITE,
        Outcome.UNSUPPORTED,
    )
    for outcome in said:
        hit = rows[rows["outcome"] == outcome]
        if not hit.empty:
            cells = "; ".join(f"{p} at batch {batches(g)}" for p, g in hit.groupby("policy"))
            word = WORDS[outcome]
            sentences.append(f"{word[0].upper()}{word[1:]}: {cells}.")
    return sentences


def stolen_sentence(rows: pd.DataFrame) -> str | None:
    """Where a neighbour on a shared host took CPU from the cells' processes (steal time): the
    most any process lost, and what that does to the figures."""
    if "cpu_stolen_pct_most" not in rows:
        return None
    hit = rows[rows["cpu_stolen_pct_most"] >= STOLEN_NOTABLE]
    if hit.empty:
        return None
    cells = "; ".join(f"{p} at batch {batches(g)}" for p, g in hit.groupby("policy"))
    return (
        f"The hypervisor gave up to {hit['cpu_stolen_pct_most'].max():.0f}% of this machine's "
        f"CPU to other guests while {cells} trained (cpu_stolen_pct_most): their ms/step and "
        "images/s are slower than this machine's own, and a neighbour's load that comes and goes "
        "moves their speedups too (bench/bench_alone.py measured it); rerun them on a quieter "
        "host before quoting them."
    )


def memory_sentences(rows: pd.DataFrame) -> list[str]:
    base_oom = set(rows[is_baseline(rows) & (rows["outcome"] == Outcome.OOM)]["batch_size"])
    sentences = []
    for policy in compared(rows):
        ok = rows[(rows["policy"] == policy) & (rows["outcome"] == Outcome.OK)]
        fit = ok[ok["batch_size"].isin(base_oom)]
        if not fit.empty:
            sentences.append(
                f"{policy} fit batch {batches(fit)}, where {baseline_name(rows)} ran out of memory."
            )
    return sentences


def diagnose(rows: pd.DataFrame) -> list[str]:
    """Sentences about one (variant, device), every number taken from its rows."""
    sentences = [hardware_sentence(rows.iloc[0])]
    for policy in compared(rows):
        sentences.append(speedup_sentence(rows, policy))
        slow = _slow_hardware_sentence(rows, policy)
        sentences += [slow] if slow else []
    stolen = stolen_sentence(rows)
    return (sentences + outcome_sentences(rows) + ([stolen] if stolen else []) + why(rows)
            + memory_sentences(rows))
