"""The answer the report opens with, per machine, model and device: which configuration to
train with (policy and batch size, and backend or variant where several ran), what it buys
over the baseline policy at the baseline's own best batch, and what that is on a whole
training run. The same sentence opens headline.txt, what the terminal prints when a run ends,
and is a tag of the sweep's MLflow run.

The configuration is the one with the most images per second (summary.csv's images_per_sec:
the batch over the mean step) among the cells that ran ok, fit (fits_at_batch, else a batch no
larger than largest_fit_batch: in the device's memory, or under the search's memory_limit_mb;
"fit not checked" where no search ran) and learned no worse than the baseline (parity_verdict
neither diverged, ends higher nor failed; "parity not checked" where no parity run compared
it). The baseline's figure is its own best among the same cells. Where no other policy
measurably beats it the answer says to keep the baseline.

The ratio of the two throughputs is one of N x M pairs the answer could have picked (N other
configurations, M of the baseline's batches), so its interval is Bonferroni's over all those
pairs, each at 1 - 0.05/(N·M): the pair picked holds 95% of the time however the two were
picked (report/headline.py's best of N, with both sides chosen). Where the two cells are one
comparison group (the same batch, timed in turns in the same processes) it is their paired
speedup's interval (speedup_log_se, speedup_df) so widened; otherwise they ran in different
processes and the ratio is unpaired: the standard error of its log is the root sum of squares
of the two cells' ms_per_step_log_se, its degrees of freedom Welch-Satterthwaite's from their
ms_per_step_df, rounded down. The batch sizes' ratio in it is exact.

An unpaired ratio carries everything that differs from one process to the next, and at the
default 3 processes a cell (2 degrees of freedom) whose processes spread widely makes it too
wide to tell 1.8x from none: a policy measurably faster at every batch size, each paired
comparison ±5%, would read "keep the baseline". So where the two cells are in different
groups the answer also asks the paired question, at the baseline's best batch: the other
policies there (K of them) against the baseline in the processes they shared, the one with
the highest speedup picked, its paired interval at 1 - 0.05/(K·2). Two comparisons may each
say "faster", so each takes half the error (the direct ratio's at 1 - 0.05/(N·M·2)): the
answer says "use" falsely at most 5% of the time. Where the direct ratio says faster, the
answer is as above; where only the paired one does, the answer names that policy at its own
fastest batch, says it was judged at the baseline's best batch, and gives the direct ratio
beside it with its own, wider, interval; where neither does, it keeps the baseline and gives
both. Picking the
baseline's best batch by its own throughput favours a lucky fast baseline there, which only
lowers the paired speedup: the choice cannot make a policy look faster.

A training run is what `fit` spends on the experiment's train.epochs where that is more than
one epoch, else on the 2020 experiment's run (20 epochs, validation after each; a timing run's
single epoch is no training run): the cell's steps, its validation passes and its first
epoch's one-time extra, each measured in its processes (summary.csv fullrun_s, with its
interval over processes: core/fullrun.py). Where the host ran slower than its own while a cell
was timed, the answer says so, and that cell's intervals are widened for it (core/host.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from mptbench.core import fullrun, stats
from mptbench.core.host import HOST_TOLERANCE
from mptbench.core.outcomes import Outcome
from mptbench.report.summary import CELL_KEYS, baseline_name, is_baseline

# Where an answer is: summary.csv's columns that name it.
WHERE = ["machine", "model", "device"]
# What a parity verdict says of a policy that learned worse than the baseline: left out.
LEARNED_WORSE = {
    "diverged": "diverged in the parity check",
    "ends higher": "ended with a higher loss than {baseline} in the parity check",
    "failed": "failed its parity run",
}
LEARNED = {
    "follows the baseline": "learns as {baseline} does (parity check)",
    "ends lower": "ended with a lower loss than {baseline} (parity check)",
    "unclear": "the parity check was unclear",
}
SHOWN_LEFT_OUT = 3  # faster cells left out, named; the rest counted


@dataclass(frozen=True)
class Answer:
    """One machine, model and device: what it says, the configuration it names (`chosen`),
    the fastest other policy's (`top`) and the baseline's fastest (`base`), and their
    throughput ratio with its interval for the choice (`estimate`)."""

    where: tuple[str, str, str]
    sentence: str
    chosen: pd.Series | None = None
    top: pd.Series | None = None
    base: pd.Series | None = None
    estimate: stats.Estimate | None = None
    paired: AtBaseBatch | None = None

    @property
    def verdict(self) -> str | None:
        """faster where either comparison says so, else the throughput ratio's verdict."""
        if self.paired is not None and stats.verdict(self.paired.estimate) == "faster":
            return "faster"
        return stats.verdict(self.estimate) if self.estimate is not None else None


def memory_check(row: pd.Series) -> bool | None:
    """Whether the cell's batch fit in the fits search (True, False), None where no search
    covered it."""
    if pd.notna(row.get("fits_at_batch")):
        return bool(row["fits_at_batch"])
    if pd.notna(row.get("largest_fit_batch")):
        return int(row["batch_size"]) <= int(row["largest_fit_batch"])
    return None


def _within(row: pd.Series) -> str:
    limit = row.get("memory_limit_mb")
    return f"under the {int(limit)} MB limit" if pd.notna(limit) else "in the device's memory"


def _left_out_why(row: pd.Series, baseline: str) -> str | None:
    """Why an ok cell is no answer (it does not fit, or learned worse), None where it is one."""
    if memory_check(row) is False:
        return f"does not fit {_within(row)}"
    verdict = row.get("parity_verdict")
    if isinstance(verdict, str) and verdict in LEARNED_WORSE:
        return LEARNED_WORSE[verdict].format(baseline=baseline)
    return None


def candidates(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[pd.Series, str]]]:
    """The cells an answer may be (ran ok with a throughput, fit, learned no worse), and the
    ok cells left out with why."""
    baseline = baseline_name(rows) or "the baseline"
    ran = rows[(rows["outcome"] == Outcome.OK) & (rows["images_per_sec"] > 0)]
    why = {i: _left_out_why(row, baseline) for i, row in ran.iterrows()}
    kept = ran.loc[[i for i, w in why.items() if w is None]]
    left_out = [(ran.loc[i], w) for i, w in why.items() if w is not None]
    return kept, left_out


def one_group(a: pd.Series, b: pd.Series) -> bool:
    """Whether two cells are one comparison group (the same batch and other keys)."""
    return all(a[k] == b[k] for k in CELL_KEYS)


def _paired(top: pd.Series, base: pd.Series) -> stats.Estimate | None:
    """The top cell's paired speedup over the baseline, where both are one comparison group."""
    if not one_group(top, base) or pd.isna(top.get("speedup_vs_baseline")):
        return None
    value = float(top["speedup_vs_baseline"])
    if pd.isna(top.get("speedup_log_se")) or pd.isna(top.get("speedup_df")):
        return stats.Estimate(value, 1, None)
    df = int(top["speedup_df"])
    return stats.Estimate(value, df + 1, float(top["speedup_log_se"]), df=df)


def _unpaired(top: pd.Series, base: pd.Series) -> stats.Estimate:
    """top's images/s over base's, two cells timed in different processes: the log ratio's
    standard error from both cells' ms_per_step_log_se, Welch-Satterthwaite's degrees of
    freedom from their ms_per_step_df."""
    value = float(top["images_per_sec"]) / float(base["images_per_sec"])
    figures = [top.get(c) for c in ("ms_per_step_log_se", "ms_per_step_df")]
    figures += [base.get(c) for c in ("ms_per_step_log_se", "ms_per_step_df")]
    if any(pd.isna(f) for f in figures):
        return stats.Estimate(value, 1, None)
    se_top, df_top, se_base, df_base = (float(f) for f in figures)
    v_top, v_base = se_top**2, se_base**2
    spread = v_top**2 / df_top + v_base**2 / df_base
    df = (v_top + v_base) ** 2 / spread if spread > 0 else min(df_top, df_base)
    df = max(1, math.floor(df))
    return stats.Estimate(value, df + 1, math.sqrt(v_top + v_base), df=df)


def throughput_ratio(top: pd.Series, base: pd.Series, pairs: int) -> stats.Estimate:
    """top's throughput over base's, its interval for the choice of one of `pairs` pairs."""
    estimate = _paired(top, base) or _unpaired(top, base)
    return estimate.at(stats.simultaneous(stats.CONFIDENCE, pairs))


def _duration(seconds: float, unit: tuple | None = None) -> tuple[str, tuple[str, int, int]]:
    """The time in s, min or h (the one its size asks for, or `unit`: its name, seconds and
    decimals), and the unit; one decimal below 10 of it."""
    if unit is None:
        name, size = ("s", 1) if seconds < 120 else ("min", 60) if seconds < 7200 else ("h", 3600)
        unit = (name, size, 1 if seconds / size < 10 else 0)
    return f"{seconds / unit[1]:.{unit[2]}f}", unit


def training_time(row: pd.Series) -> str | None:
    """'47 min (45–49)': the cell's whole run (fullrun_s) and its interval's ends; None where
    the cell has none."""
    if pd.isna(row.get("fullrun_s")):
        return None
    value, unit = _duration(float(row["fullrun_s"]))
    ends = [row.get(c) for c in ("fullrun_s_ci_low", "fullrun_s_ci_high")]
    if any(pd.isna(e) for e in ends):
        return f"{value} {unit[0]} (no interval)"
    low, high = (_duration(float(e), unit)[0] for e in ends)
    return f"{value} {unit[0]} ({low}–{high})"


def _ips(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _several(rows: pd.DataFrame) -> list[str]:
    return [k for k in ("backend", "variant") if rows[k].nunique() > 1]


def batch_words(row: pd.Series, rows: pd.DataFrame) -> str:
    """'batch 256', with its backend and variant where several ran: 'batch 256 on jax'."""
    named = " · ".join(str(row[k]) for k in _several(rows))
    return f"batch {int(row['batch_size'])}" + (f" on {named}" if named else "")


def configuration(row: pd.Series, rows: pd.DataFrame) -> str:
    """'mixed_bfloat16 at batch 256', with its backend and variant where several ran."""
    return f"{row['policy']} at {batch_words(row, rows)}"


def _where(key: tuple[str, str, str], several_machines: bool) -> str:
    machine, model, device = key
    return f"{model} on {device} of {machine}" if several_machines else f"{model} on {device}"


def _interval_words(
    estimate: stats.Estimate, others: int, bases: int, baseline: str, apart: bool, ways: int
) -> str:
    """'95% interval 0.30–11.1, timed in different processes, widened for the best of 6
    against float32's best of 4 and the two comparisons'."""
    if estimate.low is None:
        return "no interval"
    shown = f"95% interval {estimate.low:.2f}–{estimate.high:.2f}"
    shown += ", timed in different processes" if apart else ""
    chosen = [f"the best of {others}"] if others > 1 else []
    chosen += [f"{baseline}'s best of {bases}"] if bases > 1 else []
    widened = " against ".join(chosen)
    if ways > 1:
        widened = f"{widened} and the two comparisons" if widened else "the two comparisons"
    return f"{shown}, widened for {widened}" if widened else shown


def _memory_words(row: pd.Series) -> str:
    fits = memory_check(row)
    return "fit not checked" if fits is None else f"fits {_within(row)}"


def _learning_words(row: pd.Series, baseline: str) -> str:
    verdict = row.get("parity_verdict")
    if not isinstance(verdict, str) or verdict not in LEARNED:
        return "parity not checked"
    return LEARNED[verdict].format(baseline=baseline)


def _time_words(rows: pd.DataFrame, shown: list[pd.Series]) -> str:
    """'20 epochs of imagenette2-320 with validation after each (the 2020 experiment's run):
    float32 at batch 128 47 min (45–49), mixed_bfloat16 at batch 256 28 min (27–29)'."""
    times = [(configuration(r, rows), training_time(r)) for r in shown]
    if all(t is None for _, t in times):
        notes = [str(r["fullrun_note"]) for r in shown if pd.notna(r.get("fullrun_note"))]
        return f"a whole run's time not known ({notes[0] if notes else 'not measured'})"
    epochs, source = int(_first(rows, "fullrun_epochs")), _first(rows, "fullrun_source")
    dataset = ", ".join(str(d) for d in rows["dataset"].dropna().unique()) or "its dataset"
    run = f"{epochs} epochs of {dataset}"
    run += " with validation after each" if _first(rows, "fullrun_validates") else ""
    which = "the 2020 experiment's run" if source == fullrun.PUBLISHED else source
    each = ", ".join(f"{name} {t or 'not known'}" for name, t in times)
    return f"{run} ({which}): {each}"


def _first(rows: pd.DataFrame, column: str):
    """The first value a column holds among the rows, None where none does."""
    if column not in rows:
        return None
    found = rows[column].dropna()
    return found.iloc[0] if len(found) else None


def _host_words(shown: list[pd.Series]) -> str | None:
    """'the host ran up to 1.8× slower than its own while these were timed; their intervals
    are widened for it' (core/host.py); None where it held its speed."""
    most = max((float(r["host_slowdown_most"]) for r in shown
                if pd.notna(r.get("host_slowdown_most"))), default=1.0)
    if most <= 1 + HOST_TOLERANCE:
        return None
    widened = any(float(r.get("host_widening") or 0) > 0 for r in shown)
    said = f"the host ran up to {most:.2g}× slower than its own while these were timed"
    return said + ("; their intervals are widened for it" if widened else
                   ", in some processes (their spread is in the intervals)")


def _left_out_words(left_out: list[tuple[pd.Series, str]], above: float, rows) -> str | None:
    """The cells left out that ran faster than the answer (`above` images/s), fastest first,
    with why."""
    faster = sorted(
        (p for p in left_out if p[0]["images_per_sec"] > above),
        key=lambda p: -p[0]["images_per_sec"],
    )
    if not faster:
        return None
    named = [f"{configuration(r, rows)} ({why})" for r, why in faster[:SHOWN_LEFT_OUT]]
    more = len(faster) - SHOWN_LEFT_OUT
    label = "faster but left out" if above else "left out"
    return f"{label}: " + ", ".join(named) + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class AtBaseBatch:
    """The paired comparison at the baseline's best batch: of the K other policies there, the
    one with the highest speedup (`row`) and its interval for that choice (`estimate`)."""

    row: pd.Series
    estimate: stats.Estimate
    count: int


def at_base_batch(other: pd.DataFrame, base: pd.Series, ways: int) -> AtBaseBatch | None:
    """The other policies' paired speedups in the baseline's best cell's group, the highest,
    its interval at 1 - 0.05/(K·ways); None where no other policy has one there."""
    there = other[[one_group(r, base) for _, r in other.iterrows()]]
    there = there[there["speedup_vs_baseline"].notna()]
    if there.empty:
        return None
    row = there.loc[there["speedup_vs_baseline"].idxmax()]
    estimate = _paired(row, base)
    confidence = stats.simultaneous(stats.CONFIDENCE, len(there) * ways)
    return AtBaseBatch(row, estimate.at(confidence), len(there))


def _paired_words(found: AtBaseBatch, base: pd.Series, baseline: str, rows) -> str:
    """'at float32's best batch, 32, mixed_bfloat16 runs 1.80× as fast (95% interval
    1.55–2.09, widened for the best of 2 and the two comparisons)'."""
    estimate = found.estimate
    if estimate.low is None:
        interval = "no interval"
    else:
        chosen = f"the best of {found.count} and " if found.count > 1 else ""
        interval = (f"95% interval {estimate.low:.2f}–{estimate.high:.2f}, widened for "
                    f"{chosen}the two comparisons")
    return (f"at {baseline}'s best, {batch_words(base, rows)}, {found.row['policy']} runs "
            f"{estimate.value:.2f}× as fast ({interval})")


def _judged(key: tuple, rows, kept: pd.DataFrame, baseline: str) -> Answer:
    """The answer where both the baseline and another policy have candidates: the fastest
    other against the baseline's fastest; where those two are in different groups and that
    says no "faster", the other policies against the baseline at its best batch, paired."""
    base_rows, other = kept[is_baseline(kept)], kept[~is_baseline(kept)]
    top = other.loc[other["images_per_sec"].idxmax()]
    base = base_rows.loc[base_rows["images_per_sec"].idxmax()]
    paired = None if one_group(top, base) else at_base_batch(other, base, 2)
    ways = 2 if paired is not None else 1
    pairs = len(other) * len(base_rows) * ways
    estimate = throughput_ratio(top, base, pairs)
    verdict = stats.verdict(estimate)
    by_pair = verdict != "faster" and paired is not None and (
        stats.verdict(paired.estimate) == "faster"
    )
    if by_pair:  # the paired policy at its own fastest batch
        mine = other[other["policy"] == paired.row["policy"]]
        top = mine.loc[mine["images_per_sec"].idxmax()]
        estimate = throughput_ratio(top, base, pairs)
    ratio = f"{estimate.value:.2f}×"
    apart = not one_group(top, base)
    interval = _interval_words(estimate, len(other), len(base_rows), baseline, apart, ways)
    top_ips, base_ips = (_ips(r["images_per_sec"]) for r in (top, base))
    best = f"{base_ips} images/s at {batch_words(base, rows)}"
    checks = f"{_memory_words(top)}, {_learning_words(top, baseline)}"
    if by_pair:
        said = (f"use {configuration(top, rows)}: {top_ips} images/s; "
                f"{_paired_words(paired, base, baseline, rows)}; against {baseline}'s best, "
                f"{best}, it is {ratio} ({interval})")
        return Answer(key, f"{said}; {checks}", top, top, base, estimate, paired)
    if verdict in ("faster", None):
        head = (f"use {configuration(top, rows)}" if verdict == "faster"
                else f"{configuration(top, rows)} looks fastest but is unjudged")
        said = f"{head}: {top_ips} images/s, {ratio} {baseline}'s best, {best} ({interval})"
        return Answer(key, f"{said}; {checks}", top, top, base, estimate, paired)
    said = (
        f"keep {baseline} here: no other policy measurably beats its best, {best}; the fastest "
        f"other, {configuration(top, rows)}, {top_ips} images/s, is {ratio} that ({interval}), "
        f"{verdict}"
    )
    if paired is not None:
        said += f"; {_paired_words(paired, base, baseline, rows)}, {stats.verdict(paired.estimate)}"
    sentence = f"{said}; {baseline} {_memory_words(base)}"
    return Answer(key, sentence, base, top, base, estimate, paired)


def _unmatched(key: tuple, rows, kept: pd.DataFrame, baseline: str) -> Answer:
    """The answer where only one side has candidates: its fastest, nothing to compare."""
    chosen = kept.loc[kept["images_per_sec"].idxmax()]
    ips = _ips(chosen["images_per_sec"])
    if is_baseline(kept).all():
        said = (f"keep {baseline} here: no other policy ran ok, fit and learned no worse; its "
                f"best, {ips} images/s at {batch_words(chosen, rows)}")
        return Answer(key, f"{said}; {baseline} {_memory_words(chosen)}", chosen, base=chosen)
    said = (f"no {baseline} cell ran ok and fit, so nothing to compare with; the fastest, "
            f"{configuration(chosen, rows)}, {ips} images/s")
    checks = f"{_memory_words(chosen)}, {_learning_words(chosen, baseline)}"
    return Answer(key, f"{said}; {checks}", chosen, top=chosen)


def answer_of(key: tuple[str, str, str], rows: pd.DataFrame, several_machines: bool) -> Answer:
    """The answer for one machine, model and device (every backend and variant it ran)."""
    where, baseline = _where(key, several_machines), baseline_name(rows) or "the baseline"
    kept, left_out = candidates(rows)
    if kept.empty:
        said = f"{where}: no answer: no cell ran ok, fit and learned no worse than {baseline}"
        more = _left_out_words(left_out, 0, rows)
        return Answer(key, said + (f"; {more}" if more else "") + ".")
    found = (
        _judged(key, rows, kept, baseline)
        if is_baseline(kept).any() and not is_baseline(kept).all()
        else _unmatched(key, rows, kept, baseline)
    )
    shown = [r for r in (found.base, found.top) if r is not None]
    parts = [f"{where}: {found.sentence}", _time_words(rows, shown)]
    parts += [w for w in [_host_words(shown)] if w]
    parts += [w for w in [_left_out_words(left_out, found.chosen["images_per_sec"], rows)] if w]
    return replace(found, sentence="; ".join(parts) + ".")


def answers(summary: pd.DataFrame) -> list[Answer]:
    """One per machine, model and device, in the summary's order."""
    several = summary["machine"].nunique() > 1
    return [
        answer_of(tuple(map(str, key)), rows, several)
        for key, rows in summary.groupby(WHERE, sort=True)
    ]


def answer_lines(summary: pd.DataFrame) -> list[str]:
    """The answers' sentences: what the report, headline.txt and the sweep's run open with."""
    return [a.sentence for a in answers(summary)]
