"""Do the intervals cover what they claim? A simulation of the whole timing path.

Steps are drawn from noise models that hold what was seen on shared 2-core machines: a spread
between processes of 2-8% (part shared by the policies of one process, part each policy's
own; normal, heavy-tailed or bimodal), a per-policy effect that moves with the process (a
policy whose step follows the shared part more or less than the baseline's), autocorrelated
steps within a process (AR(1), phi up to 0.9), occasional slow outliers in any process, slow
drift over minutes, and carry-over from one turn to the next (the first step of a turn after
another arm's turn is slower by an amount that depends on that arm). The simulated steps go
through the production code unchanged: each process's policies take turns in rounds
(engine/rounds.py), each timed by the StepClock the engine builds (engine/repeat.py `step_clock`:
the default train settings of conf/train/benchmark.yaml with their warm-up time and step
limit: an arm whose first timed step is over train.max_step_seconds stops as over_budget and
leaves the group); the number of processes is decided by jobs/repeats.py (3, then as many more
as their spread says a speedup needs for ±precision, up to max_repeats: Stein's two-stage
procedure); the intervals come from core/stats.py.

The regimes are the default grid's on a 2-core CPU: 50 ms, 1 s and 12 s baseline steps (100,
20 and 3 timed steps a process under the 20 s share of time_budget_s; 5, 3 and 1 steps a turn),
groups of 2 and 3 arms, true speedups of 0.12x, 1.08x and 1.7x. Each regime runs A/A tries
(the first policy a copy of the baseline: 1.0x) and A/B tries, and prints how often the 95%
speedup intervals hold the true speedup (coverage; target 93% or more) in all and for the
worst arm, how often a copy of the baseline is called faster or slower (A/A false; target 5%
or less), each with its binomial standard error, the median half-width, the processes a group
used, and the share of speedups left without an interval (an arm over the step limit in its
first process).

    python bench/bench_coverage.py                 # 2000 A/A and 2000 A/B tries a regime
    python bench/bench_coverage.py --quick         # a smoke run: 40 of each
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, replace

from common import ROOT

from mptbench.core import stats
from mptbench.core.contract import ArmResult, RepeatResult, Run
from mptbench.core.policies import Policy
from mptbench.engine.repeat import step_clock
from mptbench.engine.rounds import Rounds
from mptbench.engine.timing import after_turn
from mptbench.jobs import repeats
from mptbench.plan import Cell, compose_config, run_config

COMPILE = 3.0  # a process's first step of each arm takes this many steps (it compiles)
START_S = 8.0  # starting a process and its framework
DRIFT_S = 120.0  # how slowly the machine's drift forgets (another tenant's load comes and goes)
# The first step of a turn that follows another arm's is slowed by `carry` times that arm's
# weight: float32 and its copies move the most bytes (1), the mixed policies half as many.
CARRY_WEIGHT = {"baseline": 1.0, "copy": 1.0, "policy": 0.5}


@dataclass(frozen=True)
class Regime:
    """log(step) = log(true) + (1 + systematic) x shared + own + drift(t) + AR(1), times an
    occasional outlier, plus carry-over on a turn's first step."""

    name: str
    step_s: float  # the baseline's true step
    effects: tuple[float, ...]  # the A/B tries' true speedups (A/A: the first is 1.0)
    shared: float = 0.02  # sd of the process effect the policies share
    own: float = 0.005  # sd of each policy's own process effect
    shape: str = "normal"  # of both process effects: normal, heavy (t, 3 df) or bimodal
    phi: float = 0.3  # AR(1) coefficient of the steps within a process
    sd: float = 0.01  # stationary sd of the AR(1) part
    outliers: float = 0.0  # share of steps slowed 1.5-3x, in any process
    drift: float = 0.0  # sd of the machine's slow drift (shared by every process)
    systematic: float = 0.0  # how much more than the baseline a policy follows `shared`
    carry: float = 0.0  # the slowdown of a turn's first step after another arm (weight 1)


MS50, S1, S12 = 0.050, 1.0, 12.0
B16, GRID = (1.08,), (1.7, 0.12)  # bf16's few percent; the grid's bf16 and fp16 on the CPU
LONG = (1.08, 1.7)  # at 12 s fp16's 0.12x would be a 100 s step: over the step limit
BAD = dict(shared=0.08, own=0.02, phi=0.9, sd=0.03, outliers=0.03, drift=0.05)
REGIMES = [
    Regime("50ms quiet", MS50, B16),
    Regime("50ms all of it", MS50, B16, **BAD),
    Regime("50ms own 4%", MS50, B16, shared=0.04, own=0.04, phi=0.5, sd=0.02),
    Regime("50ms 3 arms heavy", MS50, GRID, shared=0.04, own=0.01, shape="heavy",
           outliers=0.03, systematic=0.25, carry=0.03),
    Regime("1s processes 8%", S1, B16, shared=0.08, own=0.02, phi=0.5, sd=0.02),
    Regime("1s outliers 3%", S1, B16, shared=0.04, own=0.01, phi=0.5, sd=0.02, outliers=0.03),
    Regime("1s 3 arms heavy", S1, GRID, shared=0.04, own=0.01, shape="heavy", phi=0.5,
           sd=0.02, outliers=0.03, systematic=0.25),
    Regime("1s 3 arms bimodal", S1, LONG, shared=0.04, own=0.01, shape="bimodal", phi=0.5,
           sd=0.02, drift=0.05, carry=0.03),
    Regime("12s quiet", S12, B16),
    Regime("12s processes 8%", S12, B16, shared=0.08, own=0.02, phi=0.5, sd=0.02),
    Regime("12s outliers 3%", S12, B16, shared=0.04, own=0.01, phi=0.5, sd=0.02,
           outliers=0.03),
    Regime("12s 1.7x heavy", S12, (1.7,), shared=0.04, own=0.01, shape="heavy", phi=0.5,
           sd=0.02, outliers=0.03),
    Regime("12s own 4% systematic", S12, B16, shared=0.08, own=0.04, phi=0.5, sd=0.02,
           systematic=0.5),
    Regime("12s 3 arms bimodal", S12, LONG, shared=0.04, own=0.01, shape="bimodal", phi=0.5,
           sd=0.02, outliers=0.03, drift=0.05, carry=0.03),
    Regime("12s 3 arms heavy", S12, LONG, shared=0.04, own=0.01, shape="heavy", phi=0.5,
           sd=0.02, outliers=0.03, systematic=0.25, carry=0.03),
    Regime("12s 3 arms all of it", S12, LONG, shape="heavy", systematic=0.25, carry=0.03,
           **BAD),
]


def process_effect(rng: random.Random, sd: float, shape: str) -> float:
    """One draw of mean 0 and standard deviation `sd`: normal; heavy (Student t, 3 df: one
    process in 72 beyond 3 sd, where a normal has one in 370); or bimodal (one process in four
    in a slow mode 2 sd above the others, each mode's spread half the whole's)."""
    if sd == 0:
        return 0.0
    if shape == "heavy":
        chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(3))
        return sd * rng.gauss(0, 1) / math.sqrt(chi2 / 3) / math.sqrt(3)
    if shape == "bimodal":
        return rng.gauss(0, sd / 2) + 2 * sd * ((rng.random() < 0.25) - 0.25)
    return rng.gauss(0, sd)


@dataclass(frozen=True)
class Arm:
    """One policy of a simulated group: its true step and what kind of arm it is."""

    name: str
    true_s: float
    kind: str  # baseline, copy or policy (CARRY_WEIGHT)


class Machine:
    """A shared clock and the noise: what each simulated step takes."""

    def __init__(self, regime: Regime, rng: random.Random):
        self.regime, self.rng, self.t = regime, rng, 0.0
        self.level = rng.gauss(0, regime.drift)  # the drift's, in log(step)
        self.last: Arm | None = None

    def now(self) -> float:
        return self.t

    def process(self, arms: list[Arm]) -> dict[str, dict]:
        """A fresh process's effects on each arm (it starts with no turn before its first)."""
        r, self.last = self.regime, None
        shared = process_effect(self.rng, r.shared, r.shape)
        own = {a.name: process_effect(self.rng, r.own, r.shape) for a in arms}
        follows = {a.name: 1 + (r.systematic if a.kind == "policy" else 0) for a in arms}
        return {a.name: {"level": shared * follows[a.name] + own[a.name], "ar": 0.0} for a in arms}

    def wait(self, seconds: float) -> None:
        """Time passes; the drift moves on (Ornstein-Uhlenbeck: it forgets in DRIFT_S)."""
        keep = math.exp(-seconds / DRIFT_S)
        self.level = keep * self.level + self.rng.gauss(0, self.regime.drift) * math.sqrt(
            1 - keep**2
        )
        self.t += seconds

    def step(self, arm: Arm, state: dict, first: bool) -> float:
        """One step of `arm` (its process's first compiles); the clock moves on by it."""
        r = self.regime
        state["ar"] = r.phi * state["ar"] + self.rng.gauss(0, r.sd * math.sqrt(1 - r.phi**2))
        seconds = arm.true_s * math.exp(state["level"] + state["ar"] + self.level)
        if first:
            seconds *= COMPILE
        if self.last is not None and self.last is not arm:
            seconds *= 1 + r.carry * CARRY_WEIGHT[self.last.kind]
        if self.rng.random() < r.outliers:
            seconds *= self.rng.uniform(1.5, 3.0)
        self.wait(seconds)
        self.last = arm
        return seconds


class SimulatedTrainer:
    """Stands in for jobs/trainer.py: one repeat is one simulated process in which the arms
    take turns (engine/rounds.py), each timed by the clock the engine builds for it."""

    def __init__(self, machine: Machine, arms: dict[str, Arm]):
        self.machine, self.arms = machine, arms
        self.counts: list[tuple[int, int]] = []  # the baseline's (timed steps, rounds)

    def repeat(self, prepared, repeat: int, runs: list[Run]) -> RepeatResult:
        names = [r.policy.name for r in runs]
        train = runs[0].train
        turns = Rounds(names, train.round_samples, train.round_seconds)
        # Read in the simulated time, not the wall's.
        clocks = {r.policy.name: step_clock(r, now=self.machine.now) for r in runs}
        states = self.machine.process([self.arms[n] for n in names])
        self.machine.wait(START_S)
        while turns.live:
            name = turns.current
            clock = clocks[name]
            clock.batch_begin()
            self.machine.step(self.arms[name], states[name], first=clock.step == 0)
            after_turn(clock, turns, name, clock.batch_end(0.0))
        process = f"p{repeat}-{self.machine.rng.random():.9f}"
        results = []
        for name, clock in clocks.items():
            clock.close_segment()
            outcome = "over_budget" if clock.over_budget else "ok"
            if self.arms[name].kind == "baseline":
                self.counts.append((len(clock.step_seconds), len(set(clock.rounds))))
            results.append(ArmResult(repeat, name, {}, outcome=outcome,
                                     step_s=clock.step_seconds, rounds=clock.rounds,
                                     process=process))
        return RepeatResult(process, results)


@functools.cache
def runs_for(names: tuple[str, ...]) -> list[Run]:
    """The default train settings (conf/train/benchmark.yaml), for a group of policies."""
    cfg = compose_config(ROOT / "conf", None, ["policy=[float32]"])
    base = run_config(
        cfg, Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", "float32", 32)
    )
    return [
        replace(base, policy=Policy(name, "float32", baseline=i == 0))
        for i, name in enumerate(names)
    ]


def group(regime: Regime, aa: bool) -> tuple[list[Arm], list[Run]]:
    """The arms of one try: the baseline, then one per effect (in an A/A try the first is a
    copy of the baseline)."""
    arms = [Arm("float32", regime.step_s, "baseline")]
    for i, effect in enumerate(regime.effects):
        if aa and i == 0:
            arms.append(Arm("float32_copy", regime.step_s, "copy"))
        else:
            arms.append(Arm(f"policy{i}_{effect}x", regime.step_s / effect, "policy"))
    return arms, runs_for(tuple(a.name for a in arms))


def experiment(regime: Regime, rng: random.Random, aa: bool) -> dict:
    """One simulated comparison group: each non-baseline arm's speedup against the truth."""
    arms, runs = group(regime, aa)
    trainer = SimulatedTrainer(Machine(regime, rng), {a.name: a for a in arms})
    with contextlib.redirect_stdout(io.StringIO()):  # what a job would log
        measured = repeats.measure(trainer, "unused", runs)
    found = repeats.speedups(measured.results, runs, runs[0].train.repeats)
    speedups = []
    for i, arm in enumerate(arms[1:]):
        true = regime.step_s / arm.true_s
        estimate = found.get(arm.name)
        if estimate is None or estimate.low is None:
            speedups.append({"arm": i, "copy": arm.kind == "copy", "interval": False})
            continue
        called = stats.verdict(estimate) in ("faster", "slower")
        speedups.append(
            {
                "arm": i,
                "copy": arm.kind == "copy",
                "interval": True,
                "covered": estimate.low <= true <= estimate.high,
                "false": arm.kind == "copy" and called,
                "half_width": estimate.half_width,
            }
        )
    return {
        "speedups": speedups,
        "processes": measured.repeats,
        "counts": trainer.counts,
    }


def _share(hits: list[bool]) -> str:
    """A share in percent with its binomial standard error."""
    if not hits:
        return "-"
    p = sum(hits) / len(hits)
    return f"{100 * p:.1f} ± {100 * math.sqrt(p * (1 - p) / len(hits)):.1f}%"


def row(regime: Regime, tries: int, seed: int) -> str:
    """The regime's line of the table, from `tries` A/A and `tries` A/B tries."""
    rng = random.Random(f"{seed}:{regime.name}")
    results = [experiment(regime, rng, aa) for aa in (True, False) for _ in range(tries)]
    found = [s for r in results for s in r["speedups"]]
    judged = [s for s in found if s["interval"]]
    by_arm: dict[tuple, list[bool]] = {}
    for s in judged:
        by_arm.setdefault((s["copy"], s["arm"]), []).append(s["covered"])
    worst = min(by_arm.values(), key=lambda hits: sum(hits) / len(hits))
    counts = [c for r in results for c in r["counts"]]
    steps = statistics.median(n for n, _ in counts)
    per_turn = statistics.median(n / k for n, k in counts if k)
    effects = ", ".join(f"{e:g}" for e in regime.effects)
    cells = [
        regime.name, f"{1 + len(regime.effects)}: {effects}", f"{steps:g} / {per_turn:.3g}",
        _share([s["covered"] for s in judged]), _share(worst),
        _share([s["false"] for s in judged if s["copy"]]),
        f"{100 * statistics.median(s['half_width'] for s in judged):.1f}%",
        f"{statistics.fmean(r['processes'] for r in results):.2f}",
        f"{100 * (1 - len(judged) / len(found)):.1f}%",
    ]
    return "| " + " | ".join(cells) + " |"


HEAD = (
    "| regime | arms: speedups | steps / per turn | speedup cov. | worst arm | A/A false "
    "| half-width | processes | no interval |"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=2000, help="A/A and A/B tries a regime")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 40 tries of each")
    parser.add_argument("--only", default="", help="the regimes whose name holds this")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tries = 40 if args.quick else args.tries
    started = time.monotonic()
    print(f"{tries} A/A and {tries} A/B tries per regime; nominal 95% intervals; "
          "± one binomial standard error")
    print(HEAD)
    print("|" + " --- |" * HEAD.count(" | ") + " --- |")
    for regime in REGIMES:
        if args.only in regime.name:
            print(row(regime, tries, args.seed), flush=True)
    print(f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
