"""The headline of a finished run: first the answer per machine, model and device (its lead,
then its details: report/answer.py), then per group how many cells ran, were over budget or
failed. The aggregate writes it beside the report as headline.txt (the terminal prints it when
a run ends); the sweep's MLflow run keeps it as metrics and tags. No line judges a policy
against the baseline a second time: the answer is the one verdict per pair. The largest
speedup at one batch size per group is a metric of the sweep run (best_speedup.*), and the
report's tables show every cell's.

The best of N cells is a choice, and the best of N cells with no true effect looks faster
by chance far more often than 1 time in 20: the best_speedup.* metric's interval is widened for
the choice (Bonferroni: each of N intervals at 1 - 0.05/N, so all N hold together 95% of the
time). It is the cell's own, as summary.csv made it (report/summary.py estimate_of: its
speedup_log_se, its degrees of freedom, under Stein's procedure the first stage's, and its host
widening), at that confidence: never narrower than the cell's own 95% interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mptbench.core import stats
from mptbench.core.outcomes import FAILED, Outcome
from mptbench.report.answer import answers
from mptbench.report.summary import estimate_of, groups, is_baseline
from mptbench.report.variants import generations


@dataclass(frozen=True)
class Best:
    """The cell with the highest speedup among `count`, its interval adjusted for the choice."""

    row: pd.Series
    count: int
    estimate: stats.Estimate | None


def best(rows: pd.DataFrame) -> Best | None:
    """The cell with the highest speedup over the baseline, among every other cell."""
    hit = rows[~is_baseline(rows) & rows["speedup_vs_baseline"].notna()]
    if hit.empty:
        return None
    top = hit.sort_values("speedup_vs_baseline", ascending=False).iloc[0]
    estimate = estimate_of(top, "speedup")
    if estimate is not None and estimate.log_se is not None:
        estimate = estimate.at(stats.simultaneous(stats.CONFIDENCE, len(hit)))
    else:  # one process: no interval to judge by
        estimate = None
    return Best(top, len(hit), estimate)


def counts(rows: pd.DataFrame) -> dict[str, int]:
    outcomes = rows["outcome"]
    return {
        "ran": int((outcomes == Outcome.OK).sum()),
        Outcome.OVER_BUDGET: int((outcomes == Outcome.OVER_BUDGET).sum()),
        # Unsupported is no failure: the device (or its cap) has no kernel for the policy.
        "failed": int((outcomes.isin(FAILED) & (outcomes != Outcome.UNSUPPORTED)).sum()),
        Outcome.UNSUPPORTED: int((outcomes == Outcome.UNSUPPORTED).sum()),
    }


# Why a comparison took the processes it did (the record's processes_why: jobs/repeats.py).
WHY_WORDS = {
    "settled": "its verdict settled by the first ones (at 99%)",
    "precise": "its interval within train.precision",
    "futile": "more could not have brought it near train.precision",
    "most": "train.max_repeats reached",
    "host": "the host's slowdown asked for train.max_repeats",
    "fixed": "train.repeats (train.precision null)",
}


def _processes(rows: pd.DataFrame) -> list[str]:
    """'  mixed_float16 at batch 32: 3 processes, its verdict settled by the first ones (at
    99%)': per comparison timed, how many processes it took and why no more."""
    if "processes_why" not in rows:
        return []
    out = []
    for _, row in rows[~is_baseline(rows)].sort_values("batch_size").iterrows():
        why = WHY_WORDS.get(row.get("processes_why"))
        if why and pd.notna(row.get("repeats")):
            out.append(f"  {row['policy']} at batch {int(row['batch_size'])}: "
                       f"{int(row['repeats'])} processes, {why}")
    return out


def lines(summary: pd.DataFrame) -> list[str]:
    """One line per (machine, model, backend, variant, device): its cells' outcomes; under it
    a line per comparison timed: its processes and why no more."""
    out = []
    several = summary["machine"].nunique() > 1
    for (machine, model, backend, variant, device), rows in groups(summary):
        n = counts(rows)
        where = f"{device} of {machine}" if several else device
        out.append(
            f"{model} on {backend} · {variant} · {where}: {n['ran']} of {len(rows)} cells ran, "
            f"{n[Outcome.OVER_BUDGET]} over budget, {n['failed']} failed"
            + (f", {n[Outcome.UNSUPPORTED]} unsupported here" if n[Outcome.UNSUPPORTED] else "")
        )
        out += _processes(rows)
    return out


def answer_metrics_and_tags(summary: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """The answers as the sweep run's tags (`answer.<machine>.<model>.<device>`: the lead;
    `answer_details.*`: its details) and metrics (the images/s of the configuration named,
    and the fastest other policy's throughput over the baseline's best with its interval for
    the choice; where the answer also compared the policies at the baseline's best batch, the
    paired speedup it picked there with its interval)."""
    metrics, tags = {}, {}
    for found in answers(summary):
        key, choice = ".".join(found.where), found.choice
        tags[f"answer.{key}"] = found.lead
        tags[f"answer_details.{key}"] = " ".join(found.details)
        if choice.chosen is not None:
            metrics[f"answer_images_per_sec.{key}"] = float(choice.chosen["images_per_sec"])
        if choice.estimate is not None:
            metrics[f"answer_vs_baseline.{key}"] = choice.estimate.value
            if choice.estimate.low is not None:
                metrics[f"answer_vs_baseline_ci_low.{key}"] = choice.estimate.low
                metrics[f"answer_vs_baseline_ci_high.{key}"] = choice.estimate.high
        if choice.paired is not None:
            paired = choice.paired.estimate
            metrics[f"answer_at_baseline_batch.{key}"] = paired.value
            if paired.low is not None:
                metrics[f"answer_at_baseline_batch_ci_low.{key}"] = paired.low
                metrics[f"answer_at_baseline_batch_ci_high.{key}"] = paired.high
    return metrics, tags


def metrics_and_tags(summary: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """The headline as the sweep run's metrics (the largest speedup at one batch size and its
    interval for the best of N per group, cell counts; the answers' figures) and tags (the
    answers' leads and details)."""
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
    return metrics, tags


def _recipe_lines(recipe: str | None) -> list[str]:
    if not recipe:
        return []
    # Its blank lines left out: every line of an answer is indented under its lead.
    return ["  In your own code:", *(f"    {line}" for line in recipe.splitlines() if line)]


def headline_lines(summary: pd.DataFrame) -> list[str]:
    """headline.txt, what a finished run prints after where to look: each answer's lead, its
    details one sentence a line, indented under it, then the lines that reproduce its choice in
    the user's code (report/recipe.py); where variants capped the instruction set, what each
    generation bought (report/variants.py); then a line per group."""
    said = [line for a in answers(summary)
            for line in (a.lead, *(f"  {d}" for d in a.details), *_recipe_lines(a.recipe))]
    bought = [f"{g['title']}: {sentence}" for g in generations(summary)
              for sentence in g["sentences"]]
    return [*said, *bought, *lines(summary)]
