"""The headline of a finished run: first the answer per machine, model and device (which
configuration to train with and what it buys: report/answer.py), then per group the largest
speedup at one batch size (against the baseline at that batch) and how many cells ran, were
over budget or failed. The aggregate writes it beside the report as headline.txt (the terminal
prints it when a run ends); the sweep's MLflow run keeps it as metrics and tags.

The best of N cells is a choice, and the best of N cells with no true effect looks faster
by chance far more often than 1 time in 20: its interval is widened for the choice
(Bonferroni: each of N intervals at 1 - 0.05/N, so all N hold together 95% of the time), its
verdict judged on that, and the headline says "best of N". It is rebuilt from summary.csv's
speedup_log_se and speedup_df, the cell's own degrees of freedom: under Stein's procedure
those of the first stage, so it is never narrower than the cell's own 95% interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mptbench.core import stats
from mptbench.core.outcomes import FAILED, Outcome
from mptbench.report.answer import answer_lines, answers
from mptbench.report.summary import GROUP_KEYS, baseline_name, groups, is_baseline


@dataclass(frozen=True)
class Best:
    """The cell with the highest speedup among `count`, its interval adjusted for the choice."""

    row: pd.Series
    count: int
    estimate: stats.Estimate | None

    @property
    def verdict(self) -> str | None:
        return stats.verdict(self.estimate) if self.estimate else None

    @property
    def figure(self) -> str:
        return self.against(None)

    def against(self, baseline: str | None) -> str:
        """'1.73× float32 at batch 64 (95% interval ...)', or without `baseline` named."""
        value = f"{self.row['speedup_vs_baseline']:.2f}×"
        if baseline:
            value += f" {baseline} at batch {int(self.row['batch_size'])}"
        if self.estimate is None or self.estimate.low is None:
            return f"{value} (no interval)"
        low, high = self.estimate.low, self.estimate.high
        which = "95% interval" if self.count == 1 else f"95% interval for the best of {self.count}"
        return f"{value} ({which} {low:.2f}–{high:.2f})"


def best(rows: pd.DataFrame) -> Best | None:
    """The cell with the highest speedup over the baseline, among every other cell."""
    hit = rows[~is_baseline(rows) & rows["speedup_vs_baseline"].notna()]
    if hit.empty:
        return None
    top = hit.sort_values("speedup_vs_baseline", ascending=False).iloc[0]
    estimate = cell_estimate(top)
    if estimate is not None:
        estimate = estimate.at(stats.simultaneous(stats.CONFIDENCE, len(hit)))
    return Best(top, len(hit), estimate)


def cell_estimate(row: pd.Series) -> stats.Estimate | None:
    """The cell's speedup as its own interval was worked out: its standard error and its
    degrees of freedom (Stein's first stage's where processes were added, not all of them
    less one); None where it has no interval."""
    needed = ("speedup_log_se", "speedup_processes", "speedup_df")
    if not all(pd.notna(row.get(c)) for c in needed):
        return None
    return stats.Estimate(
        float(row["speedup_vs_baseline"]),
        int(row["speedup_processes"]),
        float(row["speedup_log_se"]),
        df=int(row["speedup_df"]),
    )


def counts(rows: pd.DataFrame) -> dict[str, int]:
    outcomes = rows["outcome"]
    return {
        "ran": int((outcomes == Outcome.OK).sum()),
        Outcome.OVER_BUDGET: int((outcomes == Outcome.OVER_BUDGET).sum()),
        "failed": int(outcomes.isin(FAILED).sum()),
    }


def speedup_words(top: Best, baseline: str | None) -> str:
    """'best of 4: mixed_bfloat16 at batch 64: 1.73× float32 at batch 64 (...)': the largest
    paired speedup at one batch size, its baseline named with that batch, so that it does not
    read as the answer's comparison of each policy's best batch."""
    row = top.row
    of = f"best of {top.count}: " if top.count > 1 else "best: "
    return (
        f"{of}{row['policy']} at batch {int(row['batch_size'])}: {top.against(baseline)}, "
        f"{top.verdict or 'unjudged'}"
    )


def lines(summary: pd.DataFrame) -> list[str]:
    """One line per (machine, model, backend, variant, device)."""
    out = []
    several = summary["machine"].nunique() > 1
    for (machine, model, backend, variant, device), rows in groups(summary):
        top = best(rows)
        speedup = (
            speedup_words(top, baseline_name(rows)) if top is not None else "no speedup measured"
        )
        n = counts(rows)
        where = f"{device} of {machine}" if several else device
        out.append(
            f"{model} on {backend} · {variant} · {where}: {speedup}; {n['ran']} of {len(rows)} "
            f"cells ran, {n[Outcome.OVER_BUDGET]} over budget, {n['failed']} failed"
        )
    return out


def answer_metrics_and_tags(summary: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """The answers as the sweep run's tags (`answer.<machine>.<model>.<device>`: the sentence)
    and metrics (the images/s of the configuration named, and the fastest other policy's
    throughput over the baseline's best with its interval for the choice; where the answer
    also compared the policies at the baseline's best batch, the paired speedup it picked
    there with its interval)."""
    metrics, tags = {}, {}
    for found in answers(summary):
        key = ".".join(found.where)
        tags[f"answer.{key}"] = found.sentence
        if found.chosen is not None:
            metrics[f"answer_images_per_sec.{key}"] = float(found.chosen["images_per_sec"])
        if found.estimate is not None:
            metrics[f"answer_vs_baseline.{key}"] = found.estimate.value
            if found.estimate.low is not None:
                metrics[f"answer_vs_baseline_ci_low.{key}"] = found.estimate.low
                metrics[f"answer_vs_baseline_ci_high.{key}"] = found.estimate.high
        if found.paired is not None:
            paired = found.paired.estimate
            metrics[f"answer_at_baseline_batch.{key}"] = paired.value
            if paired.low is not None:
                metrics[f"answer_at_baseline_batch_ci_low.{key}"] = paired.low
                metrics[f"answer_at_baseline_batch_ci_high.{key}"] = paired.high
    return metrics, tags


def metrics_and_tags(summary: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """The headline as the sweep run's metrics (best speedup and its interval for the choice
    per device, cell counts; the answers' figures) and tags (which policy and batch size gave
    it; the answers' sentences)."""
    metrics, tags = answer_metrics_and_tags(summary)
    for group, rows in groups(summary):
        key = ".".join(group)
        metrics |= {f"cells_{k}.{key}": v for k, v in counts(rows).items()}
        top = best(rows)
        if top is None:
            continue
        metrics[f"best_speedup.{key}"] = float(top.row["speedup_vs_baseline"])
        metrics[f"best_speedup_of.{key}"] = top.count
        if top.estimate is not None and top.estimate.low is not None:
            metrics[f"best_speedup_ci_low.{key}"] = top.estimate.low
            metrics[f"best_speedup_ci_high.{key}"] = top.estimate.high
        tags[f"best.{key}"] = speedup_words(top, baseline_name(rows))
    return metrics, tags


def headline_lines(summary: pd.DataFrame) -> list[str]:
    """headline.txt, what a finished run prints after where to look: the answers first, then a
    line per group, then the models' and the backends' best speedups side by side."""
    return [
        *answer_lines(summary),
        *lines(summary),
        *models_compared(summary),
        *backends_compared(summary),
    ]


def _words(name: str, top: Best) -> str:
    row = top.row
    where = f"from {row['policy']} at batch {int(row['batch_size'])}"
    if top.verdict == "no measurable difference":
        return f"{name} showed no measurable difference {where}, {top.figure}"
    verb = "gained" if top.verdict == "faster" else "ran at"
    return f"{name} {verb} {top.figure} {where}"


def compared(summary: pd.DataFrame, axis: str) -> list[str]:
    """Where the other group keys agree and `axis` (model or backend) takes several values:
    each value's best speedup, side by side, one line per such place."""
    others = [k for k in GROUP_KEYS if k != axis]
    several = summary["machine"].nunique() > 1
    out = []
    for key, rows in summary.groupby(others, sort=True):
        parts = [
            _words(str(name), top)
            for name, mine in rows.groupby(axis, sort=True)
            if (top := best(mine)) is not None
        ]
        machine, *where = map(str, key)  # the machine is named where there are several
        where = f"{' · '.join(where)} of {machine}" if several else " · ".join(where)
        if len(parts) >= 2:
            out.append(f"On {where}: " + "; ".join(parts) + ".")
    return out


def models_compared(summary: pd.DataFrame) -> list[str]:
    """Per backend, variant and device with several models: each model's best speedup."""
    return compared(summary, "model")


def backends_compared(summary: pd.DataFrame) -> list[str]:
    """Per model, variant and device with several backends: each backend's best speedup."""
    return compared(summary, "backend")
