"""The headline of a finished run: per device, the best mixed policy's speedup with its
interval and how many cells ran, were over budget or failed. The aggregate writes it beside
the report (the terminal prints it when a run ends); the sweep's MLflow run keeps it as
metrics and tags."""

from __future__ import annotations

import pandas as pd

from mptbench.report.summary import GROUP_KEYS, groups, is_baseline

FAILED = ("oom", "killed", "nonfinite", "unsupported")


def best(rows: pd.DataFrame) -> pd.Series | None:
    """The mixed policy's cell with the highest speedup, measurably faster ones first."""
    hit = rows[~is_baseline(rows) & rows["speedup_vs_baseline"].notna()]
    if hit.empty:
        return None
    rank = hit.assign(_faster=hit["speedup_verdict"] == "faster")
    return rank.sort_values(["_faster", "speedup_vs_baseline"], ascending=False).iloc[0]


def counts(rows: pd.DataFrame) -> dict[str, int]:
    outcomes = rows["outcome"]
    return {
        "ran": int((outcomes == "ok").sum()),
        "over_budget": int((outcomes == "over_budget").sum()),
        "failed": int(outcomes.isin(FAILED).sum()),
    }


def speedup_words(row: pd.Series) -> str:
    interval = ""
    if pd.notna(row["speedup_ci_low"]):
        interval = f" (95% interval {row['speedup_ci_low']:.2f}–{row['speedup_ci_high']:.2f})"
    verdict = row["speedup_verdict"] if isinstance(row["speedup_verdict"], str) else "unjudged"
    return (
        f"{row['policy']} at batch {int(row['batch_size'])}: "
        f"{row['speedup_vs_baseline']:.2f}×{interval}, {verdict}"
    )


def lines(summary: pd.DataFrame) -> list[str]:
    """One line per (model, backend, variant, device)."""
    out = []
    for (model, backend, variant, device), rows in groups(summary):
        top = best(rows)
        speedup = f"best {speedup_words(top)}" if top is not None else "no speedup measured"
        n = counts(rows)
        out.append(
            f"{model} on {backend} · {variant} · {device}: {speedup}; {n['ran']} of {len(rows)} "
            f"cells ran, {n['over_budget']} over budget, {n['failed']} failed"
        )
    return out


def metrics_and_tags(summary: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """The headline as the sweep run's metrics (best speedup and interval per device, cell
    counts) and tags (which policy and batch size gave it)."""
    metrics, tags = {}, {}
    for group, rows in groups(summary):
        key = ".".join(group)
        metrics |= {f"cells_{k}.{key}": v for k, v in counts(rows).items()}
        top = best(rows)
        if top is None:
            continue
        named = {"best_speedup": "speedup_vs_baseline", "best_speedup_ci_low": "speedup_ci_low",
                 "best_speedup_ci_high": "speedup_ci_high"}  # fmt: skip
        for name, column in named.items():
            if pd.notna(top[column]):
                metrics[f"{name}.{key}"] = float(top[column])
        tags[f"best.{key}"] = speedup_words(top)
    return metrics, tags


def headline_lines(summary: pd.DataFrame) -> list[str]:
    """What a finished run prints after where to look: a line per group, then the models'
    and the backends' best speedups side by side."""
    return [*lines(summary), *models_compared(summary), *backends_compared(summary)]


def _words(name: str, top: pd.Series) -> str:
    verdict = top["speedup_verdict"] if isinstance(top["speedup_verdict"], str) else None
    interval = ""
    if pd.notna(top["speedup_ci_low"]):
        interval = f" (95% interval {top['speedup_ci_low']:.2f}–{top['speedup_ci_high']:.2f})"
    figure = f"{top['speedup_vs_baseline']:.2f}×{interval}"
    where = f"from {top['policy']} at batch {int(top['batch_size'])}"
    if verdict == "no measurable difference":
        return f"{name} showed no measurable difference {where}, {figure}"
    verb = "gained" if verdict == "faster" or top["speedup_vs_baseline"] > 1 else "ran at"
    return f"{name} {verb} {figure} {where}"


def compared(summary: pd.DataFrame, axis: str) -> list[str]:
    """Where the other group keys agree and `axis` (model or backend) takes several values:
    each value's best speedup, side by side, one line per such place."""
    others = [k for k in GROUP_KEYS if k != axis]
    out = []
    for key, rows in summary.groupby(others, sort=True):
        parts = [
            _words(str(name), top)
            for name, mine in rows.groupby(axis, sort=True)
            if (top := best(mine)) is not None
        ]
        if len(parts) >= 2:
            out.append(f"On {' · '.join(map(str, key))}: " + "; ".join(parts) + ".")
    return out


def models_compared(summary: pd.DataFrame) -> list[str]:
    """Per backend, variant and device with several models: each model's best speedup."""
    return compared(summary, "model")


def backends_compared(summary: pd.DataFrame) -> list[str]:
    """Per model, variant and device with several backends: each backend's best speedup."""
    return compared(summary, "backend")
