"""Which configuration the answer for one machine, model and device names, and against what: a
pure choice from summary.csv's rows, no words (report/answer.py words it).

The configuration is the one with the most images per second (the batch over the mean step)
among the cells that ran ok, fit (fits_at_batch, else a batch no larger than
largest_fit_batch) and learned no worse than the baseline (parity_verdict neither diverged,
ends higher nor failed). The baseline's figure is its own best among the same cells.

The ratio of the two throughputs is one of N x M pairs the choice could have picked (N other
configurations, M of the baseline's batches), so its interval is Bonferroni's over all those
pairs, each at 1 - 0.05/(N·M): the pair picked holds 95% of the time however the two were
picked. Where the two cells are one comparison group (the same batch, timed in turns in the
same processes) it is their paired speedup's interval (speedup_log_se, speedup_df) so widened;
otherwise they ran in different processes and the ratio is unpaired: the standard error of its
log is the root sum of squares of the two cells' ms_per_step_log_se, its degrees of freedom
Welch-Satterthwaite's from their ms_per_step_df, rounded down; each cell's host widening
(core/host.py) is added.

An unpaired ratio carries everything that differs from one process to the next, and at 3
processes a cell it can be too wide to tell 1.8x from none. So where the two cells are in
different groups the choice also asks the paired question, at the baseline's best batch: the
other policies there (K of them) against the baseline in the processes they shared, the one
with the highest speedup picked, its paired interval at 1 - 0.05/(K·2). Two comparisons may
each say "faster", so each takes half the error (the direct ratio's at 1 - 0.05/(N·M·2)): the
choice says "use" falsely at most 5% of the time. Where only the paired comparison says
faster, the choice is that policy at its own fastest batch; where it alone tells (slower, the
ratio no measurable difference), the baseline is kept on its word: one verdict a pair. Picking
the baseline's best batch by its own throughput favours a lucky fast baseline there, which only
lowers the paired speedup: it cannot make a policy look faster.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from mptbench.core import stats
from mptbench.core.outcomes import Outcome
from mptbench.core.record import fit_at
from mptbench.core.stats import Verdict
from mptbench.report.summary import CELL_KEYS, estimate_of, is_baseline

# What the choice decided.
USE = "use"  # another policy measurably beats the baseline's best
KEEP = "keep"  # none does: keep the baseline
UNJUDGED = "unjudged"  # the fastest other has no interval (one process)
BASELINE_ONLY = "baseline only"  # no other policy ran ok, fit and learned no worse
NO_BASELINE = "no baseline"  # no baseline cell ran ok and fit: nothing to compare
NOTHING = "nothing"  # no cell ran ok, fit and learned no worse
# What a parity verdict says of a policy that learned worse than the baseline: left out.
LEARNED_WORSE = {
    "diverged": "diverged in the parity check",
    "ends higher": "ended with a higher loss than {baseline} in the parity check",
    "failed": "failed its parity run",
}


@dataclass(frozen=True)
class Paired:
    """The paired comparison at the baseline's best batch: of the K other policies there, the
    one with the highest speedup (`row`), its interval for that choice (`estimate`)."""

    row: pd.Series
    estimate: stats.Estimate
    count: int


@dataclass(frozen=True)
class Choice:
    """One machine, model and device's choice: what to train with (`chosen`), the other
    policy's cell it set against the baseline's best (`top` and `base`), their throughput ratio
    with its interval for the choice (`estimate`, over `others` x `bases` pairs and
    `comparisons` comparisons), the paired comparison at the baseline's best batch where the
    two were in different groups (`paired`), whether that decided it (`by_pair`), and the ok
    cells left out with why."""

    where: tuple[str, str, str]
    decision: str
    chosen: pd.Series | None = None
    top: pd.Series | None = None
    base: pd.Series | None = None
    estimate: stats.Estimate | None = None
    paired: Paired | None = None
    by_pair: bool = False
    others: int = 0
    bases: int = 0
    comparisons: int = 1
    left_out: tuple[tuple[pd.Series, str], ...] = ()

    @property
    def verdict(self) -> str | None:
        """The one verdict for the pair: the paired comparison's where it decided (`by_pair`),
        else the throughput ratio's."""
        if self.by_pair:
            return stats.verdict(self.paired.estimate)
        return stats.verdict(self.estimate) if self.estimate is not None else None

    @property
    def apart(self) -> bool:
        """Whether the two cells compared ran in different processes."""
        return self.top is not None and self.base is not None and not one_group(
            self.top, self.base)

    @property
    def too_few(self) -> bool:
        """Whether the baseline is kept on an interval that tells nothing: no measurable
        difference where a cell compared rests on one degree of freedom (two processes: the
        try-out's). The answer then says too few processes ran to tell, not a ratio with an
        interval of 0.00-1.86."""
        if self.decision != KEEP or self.verdict != Verdict.SAME:
            return False
        if one_group(self.top, self.base):
            dfs = [self.top.get("speedup_df")]
        else:
            dfs = [r.get("ms_per_step_df") for r in (self.top, self.base)]
        return any(pd.notna(d) and float(d) <= 1 for d in dfs)


def memory_check(row: pd.Series) -> bool | None:
    """Whether the cell's batch fit in the fits search (True, False), None where no search
    covered it."""
    given = {k: row.get(k) for k in ("fits_at_batch", "largest_fit_batch")}
    return fit_at(row["batch_size"], **{k: v if pd.notna(v) else None for k, v in given.items()})


def within(row: pd.Series) -> str:
    """Where the fits search looked: 'under the 4096 MB limit' or 'in the device's memory'."""
    limit = row.get("fits_search_mb")
    return f"under the {int(limit)} MB limit" if pd.notna(limit) else "in the device's memory"


def _left_out_why(row: pd.Series, baseline: str) -> str | None:
    """Why an ok cell is no answer (it does not fit, or learned worse), None where it is one."""
    if memory_check(row) is False:
        return f"does not fit {within(row)}"
    verdict = row.get("parity_verdict")
    if isinstance(verdict, str) and verdict in LEARNED_WORSE:
        return LEARNED_WORSE[verdict].format(baseline=baseline)
    return None


def candidates(rows: pd.DataFrame, baseline: str) -> tuple[pd.DataFrame, list]:
    """The cells an answer may be (ran ok with a throughput, fit, learned no worse), and the
    ok cells left out with why, fastest first."""
    ran = rows[(rows["outcome"] == Outcome.OK) & (rows["images_per_sec"] > 0)]
    why = {i: _left_out_why(row, baseline) for i, row in ran.iterrows()}
    kept = ran.loc[[i for i, w in why.items() if w is None]]
    left_out = sorted(((ran.loc[i], w) for i, w in why.items() if w is not None),
                      key=lambda p: -p[0]["images_per_sec"])
    return kept, left_out


def one_group(a: pd.Series, b: pd.Series) -> bool:
    """Whether two cells are one comparison group (the same batch and other keys)."""
    return all(a[k] == b[k] for k in CELL_KEYS)


def paired_estimate(top: pd.Series, base: pd.Series) -> stats.Estimate | None:
    """The top cell's paired speedup over the baseline, where both are one comparison group,
    as summary.csv's interval has it."""
    return estimate_of(top, "speedup") if one_group(top, base) else None


def unpaired_estimate(top: pd.Series, base: pd.Series) -> stats.Estimate:
    """top's images/s over base's, two cells timed in different processes: the ratio of their
    throughputs, each with its step's interval as summary.csv has it (stats.ratio_of)."""
    def throughput(row: pd.Series) -> stats.Estimate:
        step = estimate_of(row, "ms_per_step") or stats.Estimate(1.0, 1, None)
        return replace(step, value=float(row["images_per_sec"]))

    return stats.ratio_of(throughput(top), throughput(base))


def throughput_ratio(top: pd.Series, base: pd.Series, pairs: int) -> stats.Estimate:
    """top's throughput over base's, its interval for the choice of one of `pairs` pairs."""
    estimate = paired_estimate(top, base) or unpaired_estimate(top, base)
    return estimate.at(stats.simultaneous(stats.CONFIDENCE, pairs))


def at_base_batch(other: pd.DataFrame, base: pd.Series, comparisons: int) -> Paired | None:
    """The other policies' paired speedups in the baseline's best cell's group, the highest,
    its interval at 1 - 0.05/(K·comparisons); None where no other policy has one there."""
    there = other[[one_group(r, base) for _, r in other.iterrows()]]
    there = there[there["speedup_vs_baseline"].notna()]
    if there.empty:
        return None
    row = there.loc[there["speedup_vs_baseline"].idxmax()]
    confidence = stats.simultaneous(stats.CONFIDENCE, len(there) * comparisons)
    return Paired(row, paired_estimate(row, base).at(confidence), len(there))


def _judged(where: tuple, kept: pd.DataFrame, left_out: tuple) -> Choice:
    """Both the baseline and another policy have candidates: the fastest other against the
    baseline's fastest; where those two are in different groups, also the paired comparison
    at the baseline's best batch."""
    base_rows, other = kept[is_baseline(kept)], kept[~is_baseline(kept)]
    top = other.loc[other["images_per_sec"].idxmax()]
    base = base_rows.loc[base_rows["images_per_sec"].idxmax()]
    comparisons = 1 if one_group(top, base) else 2
    paired = at_base_batch(other, base, comparisons) if comparisons == 2 else None
    comparisons = 2 if paired is not None else 1
    pairs = len(other) * len(base_rows) * comparisons
    estimate = throughput_ratio(top, base, pairs)
    by_pair = decides(paired, estimate)
    if by_pair and stats.verdict(paired.estimate) == Verdict.FASTER:  # it, at its fastest batch
        mine = other[other["policy"] == paired.row["policy"]]
        top = mine.loc[mine["images_per_sec"].idxmax()]
        estimate = throughput_ratio(top, base, pairs)
    verdict = stats.verdict(paired.estimate) if by_pair else stats.verdict(estimate)
    decision = USE if verdict == Verdict.FASTER else UNJUDGED if verdict is None else KEEP
    return Choice(where, decision, base if decision == KEEP else top, top, base, estimate,
                  paired, by_pair, len(other), len(base_rows), comparisons, left_out)


def decides(paired: Paired | None, estimate: stats.Estimate) -> bool:
    """Whether the paired comparison gives the verdict: where it says faster and the ratio
    does not, or slower where the ratio tells nothing (one verdict for the pair, the one
    that can tell)."""
    if paired is None:
        return False
    mine, direct = stats.verdict(paired.estimate), stats.verdict(estimate)
    return (mine == Verdict.FASTER and direct != Verdict.FASTER) or (
        mine == Verdict.SLOWER and direct in (None, Verdict.SAME))


def choose(where: tuple[str, str, str], rows: pd.DataFrame, baseline: str) -> Choice:
    """The choice for one machine, model and device (every backend and variant it ran)."""
    kept, left_out = candidates(rows, baseline)
    left_out = tuple(left_out)
    if kept.empty:
        return Choice(where, NOTHING, left_out=left_out)
    if is_baseline(kept).any() and not is_baseline(kept).all():
        return _judged(where, kept, left_out)
    fastest = kept.loc[kept["images_per_sec"].idxmax()]
    if is_baseline(kept).all():
        return Choice(where, BASELINE_ONLY, fastest, base=fastest, left_out=left_out)
    return Choice(where, NO_BASELINE, fastest, top=fastest, left_out=left_out)
