"""How many processes a comparison group is timed in: train.repeats first; then, where a
speedup's interval from those would be wider than ±train.precision, its verdict is not
settled yet and more processes could bring it near that precision, as many more as their
spread asks for (Stein's two-stage procedure: core/stats.py), up to train.max_repeats. A
trainer that dies is blamed on the arm whose turn it was (the engine's progress file says),
and the group goes on without it."""

from __future__ import annotations

from dataclasses import dataclass, field

from mptbench.core import stats
from mptbench.core.contract import ArmResult, Run
from mptbench.core.outcomes import Outcome
from mptbench.jobs.trainer import Death, Trainer


@dataclass
class Measured:
    results: dict[str, list[ArmResult]]
    deaths: dict[str, Death] = field(default_factory=dict)
    repeats: int = 0


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
# slower more often than 1 time in 20 (bench_coverage.py: 6.0% at 95% for a policy with a
# process effect of its own, 4.3% at 99%; at 99% at most 1% can be added to the final 5%).
SETTLE_CONFIDENCE = 0.99


def settled(first_stage: stats.Estimate) -> bool:
    """A first stage whose verdict is faster or slower even at SETTLE_CONFIDENCE."""
    return stats.verdict(first_stage.at(SETTLE_CONFIDENCE)) in ("faster", "slower")


# More processes are worth their minutes only where they could bring the interval near the
# precision asked: within twice of it at train.max_repeats (with the default 3% and 5
# processes: a first stage of 3 wider than about ±7.7%). The choice reads the first stage's
# spread only, which under normal noise says nothing of its mean, so stopping on it cannot
# make an interval cover less (bench_coverage.py). The default grid's 512-image steps (10-16 s
# on 2 cores) spread that much from one process to the next: two more processes took 6 min
# there and left the speedup ±20%.
FUTILE = 2.0


def futile(first_stage: stats.Estimate, precision: float, most: int) -> bool:
    """A first stage whose spread says even `most` processes would leave the speedup's
    interval wider than FUTILE x precision (the interval they gave would be at least that
    wide: it takes the larger of the first stage's spread and all processes')."""
    after = stats.half_width_after(first_stage, most)
    return after is not None and after > FUTILE * precision


def measure(trainer: Trainer, prepared: str, runs: list[Run]) -> Measured:
    """Every repeat of the group's arms that are to be timed."""
    measured = Measured({r.policy.name: [] for r in runs})
    train, active = runs[0].train, list(runs)
    wanted = train.repeats
    while active and measured.repeats < wanted:
        got = trainer.repeat(prepared, measured.repeats, active)
        if isinstance(got, Death):
            blamed = [r for r in active if r.policy.name == got.policy] or list(active)
            for run in blamed:
                measured.deaths[run.policy.name] = got
                print(f"{run.policy.name}: {got.outcome}: {got.reason}", flush=True)
            active = [r for r in active if r not in blamed]
            continue
        for arm in got.arms:
            measured.results[arm.policy].append(arm)
        active = [r for r in active if _ok(got.arms, r.policy.name)]
        measured.repeats += 1
        if measured.repeats == train.repeats:
            wanted = planned(measured.results, runs, active)
            if wanted > train.repeats:
                print(f"{wanted} repeats in all: the first {train.repeats} say so for "
                      f"train.precision={train.precision}", flush=True)
    return measured


def _ok(arms: list[ArmResult], name: str) -> bool:
    return any(a.policy == name and a.outcome == Outcome.OK for a in arms)
