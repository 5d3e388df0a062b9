"""How many processes a comparison group is timed in, and in what order: train.repeats
first; then, where a speedup's interval from those would be wider than ±train.precision, its
verdict is not settled yet and more processes could bring it near that precision, as many more
as their spread asks for (Stein's two-stage procedure: core/stats.py), up to
train.max_repeats; and up to train.max_repeats where the host ran slower than its own by more
than its speedup's interval allows (core/host.py). A trainer that dies is blamed on the arm
whose turn it was (the engine's progress file says), and the group goes on without it.

A train job times several groups (a series: jobs/series.py), and their processes are spread
in time: pass k runs the k-th process of every group that still wants one, in an order drawn
afresh each pass. A busy spell of the host then falls on processes of several groups, and
within each group on some processes and not others: spread that each group's interval over
processes sees, where back to back it would have fallen on all of one group's processes alike.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

from mptbench.core import host, stats
from mptbench.core.contract import ArmResult, Run
from mptbench.core.outcomes import Outcome
from mptbench.jobs.trainer import Death, Trainer


@dataclass
class Measured:
    results: dict[str, list[ArmResult]]
    deaths: dict[str, Death] = field(default_factory=dict)
    repeats: int = 0
    seconds: float = 0.0  # the wall time of its processes (the job's other groups' apart)
    host_asked: bool = False  # the host's slowdown asked for train.max_repeats


def timed(results: list[ArmResult]) -> list[stats.Timed]:
    """An arm's ok repeats as the speedup's pairing reads them."""
    return [(r.process, r.step_s, r.rounds) for r in results if r.outcome == Outcome.OK]


def speedups(
    results: dict[str, list[ArmResult]], runs: list[Run], first: int | None = None
) -> dict[str, stats.Estimate]:
    """Each policy's paired speedup over the group's baseline, so far (`first` processes the
    first stage)."""
    base = next((r.policy.name for r in runs if r.policy.baseline), None)
    if base is None:
        return {}
    found = {}
    for name, mine in results.items():
        if name == base:
            continue
        estimate = stats.paired_speedup(timed(results[base]), timed(mine), first)
        if estimate is not None:
            found[name] = estimate
    return found


def planned(results: dict[str, list[ArmResult]], runs: list[Run], active: list[Run]) -> int:
    """The processes in all the group needs, from its first stage: each speedup still being
    timed to ±train.precision, unless its first stage has settled its verdict already (its 99%
    interval wholly on one side of 1, the change beyond the noise threshold): more processes
    would only narrow an interval whose direction is known; or unless its spread says that
    even train.max_repeats processes would leave it wider than FUTILE x precision (`futile`):
    they would cost minutes and still not answer to the precision asked. Both rules read the
    first stage's spread or a stricter interval, never stop on a verdict at 95%:
    bench_coverage.py holds the intervals' coverage with them. A group without a baseline, or
    precision null, needs no more than train.repeats."""
    train = runs[0].train
    names = {r.policy.name for r in active if not r.policy.baseline}
    if train.precision is None or not names or len(names) == len(active):
        return train.repeats
    found = speedups(results, runs)
    return max(
        (
            stats.processes_for(found[name], train.precision, train.max_repeats)
            if name in found
            else train.max_repeats
            for name in names
            if name not in found
            or not (settled(found[name]) or futile(found[name], train.precision, train.max_repeats))
        ),
        default=train.repeats,
    )


# A first stage settles a verdict only at this stricter confidence: stopping early is a second
# look at the data, and judging it at 95% too would call a copy of the baseline faster or
# slower more often than 1 time in 20 (at 99% at most 1% can be added to the final 5%; how
# often a copy is called faster or slower is bench_coverage.py's "A/A false", bench/README.md).
SETTLE_CONFIDENCE = 0.99


def settled(first_stage: stats.Estimate) -> bool:
    """A first stage whose verdict is faster or slower even at SETTLE_CONFIDENCE."""
    found = stats.verdict(first_stage.at(SETTLE_CONFIDENCE))
    return found in (stats.Verdict.FASTER, stats.Verdict.SLOWER)


# More processes are worth their minutes only where they could bring the interval near the
# precision asked: within twice of it at train.max_repeats (with the default 3% and 5
# processes: a first stage of 3 wider than about ±7.7%). The choice reads the first stage's
# spread only, which under normal noise says nothing of its mean, so stopping on it cannot
# make an interval cover less (bench_coverage.py). The default grid's steps at batch 512 on
# 2 cores spread that much from one process to the next: more processes took minutes there and
# left the speedup far wider than asked.
FUTILE = 2.0


def futile(first_stage: stats.Estimate, precision: float, most: int) -> bool:
    """A first stage whose spread says even `most` processes would leave the speedup's
    interval wider than FUTILE x precision (the interval they gave would be at least that
    wide: it takes the larger of the first stage's spread and all processes')."""
    after = stats.half_width_after(first_stage, most)
    return after is not None and after > FUTILE * precision


def host_asks_more(
    results: dict[str, list[ArmResult]], runs: list[Run], fastest_ms: float | None
) -> bool:
    """Whether the host ran slower than its own (beyond core/host.py's tolerance) in some of
    the group's processes by more than its widest speedup's interval allows."""
    base = next((r.policy.name for r in runs if r.policy.baseline), None)
    ok = [a for a in results.get(base, []) if a.outcome == Outcome.OK]
    found = host.slowdown([a.measured.get("host_ms") for a in ok], fastest_ms)
    if found is None or not found.moved:
        return False
    widths = [e.log_half_width for e in speedups(results, runs).values()]
    # A group with no speedup (its baseline alone ran) has no interval the host could mislead.
    return bool(widths) and math.log(found.most) > max(w or 0.0 for w in widths)


@dataclass
class Timing:
    """One group's processes so far, and how many it wants."""

    trainer: Trainer
    runs: list[Run]
    measured: Measured
    active: list[Run]
    wanted: int
    planned: bool = False

    def wants_more(self) -> bool:
        return bool(self.active) and self.measured.repeats < self.wanted

    def process(self, prepared: str, sequence: int, reference=None) -> bool:
        """One process of the arms still timing; False where its trainer died (the blamed
        arm leaves, and the process is to be run again without it)."""
        started = time.monotonic()
        got = self.trainer.repeat(prepared, self.measured.repeats, self.active)
        self.measured.seconds += time.monotonic() - started
        if isinstance(got, Death):
            blamed = [r for r in self.active if r.policy.name == got.policy] or list(self.active)
            for run in blamed:
                self.measured.deaths[run.policy.name] = got
                print(f"{run.policy.name}: {got.outcome}: {got.reason}", flush=True)
            self.active = [r for r in self.active if r not in blamed]
            return False
        runs = {r.policy.name: r for r in self.active}
        for arm in got.arms:
            arm.sequence = sequence
            self.measured.results[arm.policy].append(arm)
            if reference is not None:
                reference.offer(runs[arm.policy], arm)
        self.active = [r for r in self.active if _ok(got.arms, r.policy.name)]
        self.measured.repeats += 1
        return True

    def plan(self, fastest_ms: float | None) -> None:
        """After its first stage: how many processes in all (Stein's, or the most where the
        host moved more than the interval allows)."""
        train, measured = self.runs[0].train, self.measured
        self.planned = True
        self.wanted = planned(measured.results, self.runs, self.active)
        if self.wanted < train.max_repeats and train.precision is not None and (
            host_asks_more(measured.results, self.runs, fastest_ms)
        ):
            self.wanted = train.max_repeats
            measured.host_asked = True
            print(f"{self.wanted} repeats in all: the host ran slower than its own in some of "
                  "the first ones by more than the speedup's interval allows", flush=True)
        elif self.wanted > train.repeats:
            print(f"{self.wanted} repeats in all: the first {train.repeats} say so for "
                  f"train.precision={train.precision}", flush=True)


def measure_series(
    groups: list[tuple[Trainer, list[Run]]], prepared: str, reference=None, seed: int | None = None
) -> list[Measured]:
    """Every group's processes, spread in time: pass after pass, each group that still wants a
    process runs its next one, in an order drawn afresh each pass (`seed`: that draw's, for
    a reproducible order). `reference` (jobs/host.Reference): the host's fastest on record,
    offered each process's own. Each process's place in the job's order is its arms'
    `sequence`."""
    draw = random.Random(seed)
    timings = [
        Timing(trainer, list(runs), Measured({r.policy.name: [] for r in runs}), list(runs),
               runs[0].train.repeats)
        for trainer, runs in groups
    ]
    sequence = 0
    while any(t.wants_more() for t in timings):
        due = [t for t in timings if t.wants_more()]
        draw.shuffle(due)
        for timing in due:
            # A death runs the process again without the blamed arm.
            while timing.wants_more() and not timing.process(prepared, sequence, reference):
                pass
            sequence += 1
        for timing in timings:
            if not timing.planned and timing.measured.repeats >= timing.runs[0].train.repeats:
                timing.plan(reference.fastest_ms if reference is not None else None)
    return [t.measured for t in timings]


def measure(trainer: Trainer, prepared: str, runs: list[Run], reference=None) -> Measured:
    """Every repeat of one group's arms that are to be timed."""
    return measure_series([(trainer, runs)], prepared, reference)[0]


def _ok(arms: list[ArmResult], name: str) -> bool:
    return any(a.policy == name and a.outcome == Outcome.OK for a in arms)


# Why a comparison took the processes it took (record field processes_why): its verdict was
# settled by the first stage, its interval came within train.precision, more could not have
# brought it near (futile), it reached train.max_repeats, the host's slowdown asked for them
# all, or the plan asked for train.repeats and no more (precision null).
SETTLED, PRECISE, FUTILE_WHY, MOST, HOST, FIXED = (
    "settled", "precise", "futile", "most", "host", "fixed")


def processes_why(first: stats.Estimate | None, found: stats.Estimate | None, train,
                  host_asked: bool = False) -> str | None:
    """One of the words above for a speedup timed `found.n` processes; None without one."""
    if found is None:
        return None
    if train.precision is None:
        return FIXED
    if host_asked:
        return HOST
    if found.half_width is not None and found.half_width <= train.precision:
        return PRECISE
    if first is not None and settled(first):
        return SETTLED
    if first is not None and found.n == first.n and futile(
            first, train.precision, train.max_repeats):
        return FUTILE_WHY
    return MOST
