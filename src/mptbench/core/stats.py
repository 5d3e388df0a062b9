"""Uncertainty of timings: a step time and a speedup, each with an interval over processes.

A cell is timed in several fresh processes (train.repeats, more while its speedup's interval
is wider than train.precision). What changes from one process to the next (placement, warm
caches, other tenants) is, on a shared machine, the larger part of the noise, so every interval
is a Student t interval over processes, never over the steps within one (steps are
autocorrelated, and a bootstrap that treats them as independent covers far too little):

- a cell's step: the geometric mean of its processes' mean steps, the interval a t interval
  on their logarithms;
- a speedup: the policies of one comparison group run in the same processes, taking turns in
  rounds (engine/rounds.py), so each process gives one paired figure, the mean over its rounds
  of log(baseline's round / policy's round); slow drift and what a process does to both cancel
  in it. The speedup is exp of their mean, the interval a t interval over processes. Where
  the first processes' spread says the interval would be wider than wanted, more processes
  follow, as many as that spread asks for (Stein's two-stage procedure); the interval then
  takes the larger of the first stage's spread and all processes' spread, with the first
  stage's degrees of freedom: never narrower than Stein's, so stopping when an interval
  happens to look narrow cannot make it cover less, and an outlying added process widens it
  as well as moving its mean.

bench/bench_coverage.py checks by simulation that the speedup's intervals cover what they claim
in the default grid's regimes (50 ms to 12 s steps, 2 and 3 arms, outliers, heavy tails), and
bench/bench_aa.py that an A/A comparison is called faster or slower at most 1 time in 20.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

CONFIDENCE = 0.95
# A speedup within 1% of 1 is "no measurable difference" whatever its interval says, as
# criterion.rs does: a real machine drifts by more than that from one run to the next.
NOISE_THRESHOLD = 0.01
class Verdict(StrEnum):
    """What a speedup's interval says (a StrEnum: summary.csv and MLflow hold the words)."""

    FASTER = "faster"
    SLOWER = "slower"
    SAME = "no measurable difference"


MIN_PROCESSES = 2  # a t interval over processes needs two at least (three are the default)
# A cell whose steps take this much longer than its synthetic twin's (same model, policy and
# batch on in-memory tensors) waits for its input. 15% is well above the few percent two runs
# of one cell differ by on an idle machine, and small enough to catch a pipeline that has
# started to hold the model back.
INPUT_BOUND = 1.15


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student t quantile: mean ± t·se holds the mean `confidence` of the time.
    scipy.special's inverse t, not scipy.stats' t.ppf (the same figure): importing scipy.stats
    cost each process that printed an interval a second of CPU."""
    from scipy.special import stdtrit

    return float(stdtrit(df, (1 + confidence) / 2))


def simultaneous(confidence: float, count: int) -> float:
    """The confidence each of `count` intervals needs for all of them to hold together at
    `confidence` (Bonferroni): what an interval of the best of `count` cells must use."""
    return 1 - (1 - confidence) / max(count, 1)


@dataclass(frozen=True)
class Estimate:
    """exp(mean of logs) with its t interval; `n` processes, `log_se` the standard error of the
    mean log (None with fewer than two processes: no interval). `widening` (log) is added to
    the interval's half-width on both sides: what a slowdown every process shared may have
    moved the figure by, which no spread over processes shows (core/host.py)."""

    value: float
    n: int
    log_se: float | None
    confidence: float = CONFIDENCE
    df: int | None = None  # n - 1 unless the spread came from fewer (a first stage)
    widening: float = 0.0

    @property
    def log_half_width(self) -> float | None:
        if self.log_se is None:
            return None
        return t_quantile(self.confidence, self.df or self.n - 1) * self.log_se + self.widening

    @property
    def low(self) -> float | None:
        h = self.log_half_width
        return None if h is None else self.value * math.exp(-h)

    @property
    def high(self) -> float | None:
        h = self.log_half_width
        return None if h is None else self.value * math.exp(h)

    @property
    def half_width(self) -> float | None:
        """Half the interval's width relative to the value (0.05: ±5%)."""
        if self.low is None:
            return None
        return (self.high - self.low) / 2 / self.value

    def at(self, confidence: float) -> Estimate:
        return replace(self, confidence=confidence)


def of_logs(
    logs: Sequence[float], confidence: float = CONFIDENCE, first: int | None = None
) -> Estimate:
    """The estimate from one log figure per process. With `first` (the processes planned
    before any was added for precision; Stein's two-stage procedure): the mean is over all,
    the degrees of freedom are the first stage's and the spread the larger of the first
    stage's and all processes'. Stein's (the first stage's spread alone) covers what it
    claims however many processes its first stage asked for, where processes differ by
    normal noise; the larger spread is never narrower, and it keeps an outlying added process
    from moving the mean without widening the interval (with the first stage's spread alone,
    slow outlier steps at 12 s called a copy of the baseline faster or slower more often than
    1 time in 20: bench/README.md, bench_coverage.py)."""
    if not logs:
        raise ValueError("no process measured")
    n, mean = len(logs), statistics.fmean(logs)
    stage = logs[:first] if first and first < n else logs
    if len(stage) < MIN_PROCESSES:
        return Estimate(math.exp(mean), n, None, confidence)
    sd = max(statistics.stdev(stage), statistics.stdev(logs))
    return Estimate(math.exp(mean), n, sd / math.sqrt(n), confidence, df=len(stage) - 1)


def step_estimate(
    per_process_steps: Sequence[Sequence[float]], center=statistics.fmean
) -> Estimate:
    """A cell's step: per process its mean timed step (what wall time follows: a few slow
    steps count), then their geometric mean, with a t interval on their logarithms.
    `center=statistics.median` gives the geometric mean of the processes' median steps."""
    centers = [center(s) for s in per_process_steps if len(s)]
    return of_logs([math.log(c) for c in centers])


def round_medians(steps: Sequence[float], rounds: Sequence[int]) -> dict[int, float]:
    """Each round's median step of one arm (steps and their round numbers, aligned)."""
    by_round: dict[int, list[float]] = {}
    for step, r in zip(steps, rounds, strict=True):
        by_round.setdefault(r, []).append(step)
    return {r: statistics.median(s) for r, s in by_round.items()}


def paired_log_ratio(baseline: dict[int, float], other: dict[int, float]) -> float | None:
    """One process's paired figure: the mean over the rounds both arms timed of
    log(baseline's round median / other's); None when they shared no round."""
    shared = sorted(set(baseline) & set(other))
    if not shared:
        return None
    return statistics.fmean(math.log(baseline[r] / other[r]) for r in shared)


# One process's timing of one arm: (process id, its timed steps, the round of each step).
Timed = tuple[str | None, Sequence[float], Sequence[int]]


def paired_speedup(
    baseline: Sequence[Timed], other: Sequence[Timed], first: int | None = None
) -> Estimate | None:
    """The other arm's speedup over the baseline from the processes both were timed in, round
    by round, in the order they ran (`first` of them the first stage); None when they shared
    no process (they were not timed in turns)."""
    base = {p: round_medians(s, r) for p, s, r in baseline if p and len(s) and len(r) == len(s)}
    logs = []
    for process, steps, rounds in other:
        if process in base and len(steps) and len(rounds) == len(steps):
            figure = paired_log_ratio(base[process], round_medians(steps, rounds))
            if figure is not None:
                logs.append(figure)
    return of_logs(logs, first=first) if logs else None


def processes_for(first_stage: Estimate, precision: float, most: int) -> int:
    """How many processes in all a comparison needs for an interval of ±precision, from its
    first stage's spread (Stein): at least those already run, at most `most`."""
    if first_stage.log_se is None:
        return most
    t = t_quantile(first_stage.confidence, first_stage.n - 1)
    sd = first_stage.log_se * math.sqrt(first_stage.n)
    needed = math.ceil((t * sd / math.log(1 + precision)) ** 2)
    return max(first_stage.n, min(most, needed))


def half_width_after(first_stage: Estimate, n: int) -> float | None:
    """The half-width (relative, as Estimate.half_width) a Stein interval would have after `n`
    processes in all: the first stage's spread and degrees of freedom over sqrt(n). The
    interval of_logs gives then is at least this wide (wider where the added processes spread
    more than the first stage's)."""
    if first_stage.log_se is None:
        return None
    sd = first_stage.log_se * math.sqrt(first_stage.n)
    return replace(first_stage, n=n, log_se=sd / math.sqrt(n), df=first_stage.n - 1).half_width


def input_bound_most(step_s: float, input_s: float) -> float:
    """The most a step can be over its synthetic twin's when the input pipeline alone takes
    `input_s` per batch (the larger of its wall and CPU time): all of it added to the step,
    none overlapped with the compute. Infinite where the input alone takes the whole step."""
    if input_s >= step_s:
        return math.inf
    return step_s / (step_s - input_s)


def welch_df(var_a: float, df_a: float, var_b: float, df_b: float) -> float | None:
    """Welch-Satterthwaite's degrees of freedom of a difference of two means, whose squared
    standard errors are var_a and var_b on df_a and df_b degrees of freedom; None where both
    are 0."""
    spread = var_a**2 / df_a + var_b**2 / df_b
    return (var_a + var_b) ** 2 / spread if spread > 0 else None


def ratio_of(first: Estimate, second: Estimate) -> Estimate:
    """first / second for two estimates made in different processes (on logs): their squared
    standard errors added, Welch-Satterthwaite's degrees of freedom (each one's df, else its
    n - 1) rounded down, their widenings added. The one unpaired ratio: two cells' speedup
    from their processes' medians (unpaired_log_ratios), the answer's throughput ratio of two
    cells in different groups (report/choice.py)."""
    value = first.value / second.value
    n, widening = min(first.n, second.n), first.widening + second.widening
    if first.log_se is None or second.log_se is None:
        return Estimate(value, n, None, widening=widening)
    va, vb = first.log_se**2, second.log_se**2
    df_a, df_b = first.df or first.n - 1, second.df or second.n - 1
    df = welch_df(va, df_a, vb, df_b) or 1
    return Estimate(value, n, math.sqrt(va + vb), df=max(int(df), 1), widening=widening)


def unpaired_log_ratios(baseline: Sequence[float], other: Sequence[float]) -> Estimate:
    """The speedup from two cells timed in different processes (records from before rounds,
    or hand-made): the ratio of geometric means of the processes' medians, with a Welch t
    interval (ratio_of)."""
    def of(values: Sequence[float]) -> Estimate:
        logs = [math.log(x) for x in values]
        if len(logs) < MIN_PROCESSES:
            return Estimate(math.exp(statistics.fmean(logs)), len(logs), None)
        return of_logs(logs)

    return ratio_of(of(baseline), of(other))


def verdict(estimate: Estimate) -> str | None:
    """faster or slower only where the whole interval is on one side of 1 and the change is
    beyond the noise threshold; otherwise no measurable difference. None without an interval
    (one process): unjudged."""
    if estimate.low is None:
        return None
    if abs(estimate.value - 1) < NOISE_THRESHOLD:
        return Verdict.SAME
    if estimate.low > 1:
        return Verdict.FASTER
    if estimate.high < 1:
        return Verdict.SLOWER
    return Verdict.SAME
