"""Figures as the report words them: ratios, speedups with their intervals, batch lists."""

from __future__ import annotations

import pandas as pd


def median(rows: pd.DataFrame, column: str) -> float | None:
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(values.median()) if not values.empty else None


def ratio(value: float) -> str:
    """0.93x, 3.07x; a tiny ratio keeps one significant digit (0.003x) rather than 0.00x."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.1g}x"


def dtype_of(rows: pd.DataFrame, policy: str) -> str:
    dtypes = rows.loc[rows["policy"] == policy, "compute_dtype"].dropna()
    return str(dtypes.iloc[0]) if not dtypes.empty else "unknown"


def batches(rows: pd.DataFrame) -> str:
    return ", ".join(str(int(b)) for b in sorted(set(rows["batch_size"])))


def speedup_text(
    row: pd.Series, column: str = "speedup_vs_baseline", prefix: str = "speedup"
) -> str:
    """ "1.83× (95% interval 1.80–1.86)", or the point alone when no interval was measured."""
    value, low, high = row[column], row[f"{prefix}_ci_low"], row[f"{prefix}_ci_high"]
    if pd.isna(low) or pd.isna(high):
        return f"{value:.2f}× (no interval: no raw steps recorded)"
    return f"{value:.2f}× (95% interval {low:.2f}–{high:.2f})"
