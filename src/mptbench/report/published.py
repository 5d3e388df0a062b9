"""The published (2020) numbers, and how our speedups compare with them."""

from __future__ import annotations

from importlib import resources

import pandas as pd

from mptbench.core.stats import Verdict
from mptbench.report.summary import add_speedup, compared, groups, speedup_range

# The published CPU figures (2020): seconds per step at batch size 32, one epoch, float32,
# TensorFlow's PyPI wheel against a source build with AVX2/FMA enabled.
PUBLISHED_CPU_S_PER_STEP = {"PyPI wheel": 321, "source build with AVX2/FMA": 304}
PUBLISHED_CPU_BATCH_SIZE = 32


# The published table's own policy names: its baseline, and the mixed policy it measured.
PUBLISHED_BASELINE, PUBLISHED_MIXED = "float32", "mixed_float16"


def load_published() -> pd.DataFrame:
    """The published (2020) ms/step per device, policy and batch size, with their speedups."""
    with resources.files("mptbench.report").joinpath("seed_results.csv").open() as f:
        df = pd.read_csv(f)
    df["baseline"] = df["policy"] == PUBLISHED_BASELINE
    return add_speedup(df, ["device", "batch_size"])


def percent_range(speedups: pd.Series) -> str:
    """Speedups as percent faster (negative: slower), with the × figures they come from."""
    lo, hi = speedups.min(), speedups.max()
    if f"{lo:.2f}" == f"{hi:.2f}":
        return f"{(lo - 1) * 100:+.0f}% ({lo:.2f}×)"
    return f"{(lo - 1) * 100:+.0f}% to {(hi - 1) * 100:+.0f}% ({lo:.2f}×–{hi:.2f}×)"


def compare_with_published(summary: pd.DataFrame, published: pd.DataFrame) -> str:
    """How our mixed-precision speedups compare with the published ones, from both tables."""
    theirs = []
    for device, rows in published.groupby("device", sort=False):
        s = speedup_range(rows, PUBLISHED_MIXED)
        if not s.empty:
            theirs.append(f"{percent_range(s)} on the {device}")
    ours = [
        f"{policy} {_ours(rows, policy)} for {model} on {backend} · {variant} · {device}"
        f"{_hardware(rows)}"
        for (_, model, backend, variant, device), rows in groups(summary)
        for policy in compared(rows)
        if not speedup_range(rows, policy).empty
    ]
    text = f"Published, {PUBLISHED_MIXED} against {PUBLISHED_BASELINE}: " + "; ".join(theirs)
    if ours:
        return text + ". Ours: " + "; ".join(ours) + "."
    return text + ". Ours: no policy and the baseline both ran ok at the same batch size."


def _hardware(rows: pd.DataFrame) -> str:
    name = rows["device_name"].iloc[0]
    return f" ({name})" if isinstance(name, str) else ""


def _ours(rows: pd.DataFrame, policy: str) -> str:
    """Our speedups where they are measurable; the batch sizes where they are not."""
    hit = rows[(rows["policy"] == policy) & rows["speedup_vs_baseline"].notna()]
    same = hit[hit["speedup_verdict"] == Verdict.SAME]
    measurable = hit.drop(same.index).set_index("batch_size")["speedup_vs_baseline"]
    parts = [percent_range(measurable)] if not measurable.empty else []
    if not same.empty:
        batch_sizes = ", ".join(str(int(b)) for b in sorted(same["batch_size"]))
        parts.append(f"no measurable difference at batch {batch_sizes}")
    return " and ".join(parts)
