"""Do the intervals cover what they claim? A simulation of the whole timing path.

Steps are drawn from noise models that hold what was seen on shared 2-core machines: a spread
between processes of 2-8% (part shared by the policies of one process, part each policy's
own), autocorrelated steps within a process (AR(1), phi up to 0.9), occasional slow outliers
and slow drift over minutes. The simulated steps go through the production code unchanged:
each process's policies take turns in rounds (engine/rounds.py), each timed by its StepClock
(engine/timing.py) under the default train settings (conf/train/benchmark.yaml); the number of
processes is decided by jobs/repeats.py (3, then as many more as their spread says a speedup
needs for ±precision, up to max_repeats: Stein's two-stage procedure); the step and speedup
intervals come from core/stats.py.

For each noise model it prints, over --experiments simulated comparisons: how often the 95%
interval of the baseline's step and of the speedup holds the true value (coverage; the target
is 93% or more; for the step also the step while it was measured, "window": a drift slower
than the minute or two a group takes is in no interval measured within it, and reruns at
another time show it), how often an A/A comparison (a copy of the baseline) is called faster or
slower, the median half-width of the speedup's interval, the processes used, and the fewest
timed steps any arm had in a process.

    python bench/bench_coverage.py --experiments 400
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from mptbench.core import stats  # noqa: E402
from mptbench.core.contract import ArmResult, RepeatResult, Run  # noqa: E402
from mptbench.core.policies import Policy  # noqa: E402
from mptbench.engine.rounds import Rounds  # noqa: E402
from mptbench.engine.timing import StepClock, after_turn  # noqa: E402
from mptbench.jobs import repeats  # noqa: E402
from mptbench.plan import Cell, compose_config, run_config  # noqa: E402

STEP_S = 0.060  # the baseline's true step: 60 ms (the "50 ms or more" cells)
TRUE_SPEEDUP = 1.10  # the other policy's, in the comparisons that have an effect


@dataclass(frozen=True)
class Noise:
    """log(step) = log(true) + shared + own + drift(t) + AR(1), times an occasional outlier."""

    name: str
    shared: float = 0.0  # sd of the process effect both policies share
    own: float = 0.0  # sd of each policy's own process effect
    phi: float = 0.0  # AR(1) coefficient of the steps within a process
    sd: float = 0.01  # stationary sd of the AR(1) part
    outliers: float = 0.0  # share of steps slowed 1.5-3x
    drift: float = 0.0  # amplitude of a slow sine (period 3 minutes, random phase)


NOISES = [
    Noise("quiet", shared=0.02, own=0.005, phi=0.3, sd=0.01),
    Noise("processes 8%", shared=0.08, own=0.02, phi=0.5, sd=0.02),
    Noise("own 4% per policy", own=0.04, phi=0.5, sd=0.02),
    Noise("AR(1) phi 0.9", shared=0.04, own=0.01, phi=0.9, sd=0.03),
    Noise("outliers 3%", shared=0.04, own=0.01, phi=0.5, sd=0.02, outliers=0.03),
    Noise("drift 5%", shared=0.04, own=0.01, phi=0.5, sd=0.02, drift=0.05),
    Noise("all of it", shared=0.08, own=0.02, phi=0.9, sd=0.03, outliers=0.02, drift=0.05),
]


class Machine:
    """A shared clock and the noise: what each simulated step takes."""

    def __init__(self, noise: Noise, rng: random.Random):
        self.noise, self.rng, self.t = noise, rng, 0.0
        self.phase = rng.uniform(0, 2 * math.pi)

    def now(self) -> float:
        return self.t

    def process(self, arms: list[str]) -> dict[str, dict]:
        shared = self.rng.gauss(0, self.noise.shared)
        return {a: {"level": shared + self.rng.gauss(0, self.noise.own), "ar": 0.0} for a in arms}

    def drift(self) -> float:
        return self.noise.drift * math.sin(2 * math.pi * self.t / 180 + self.phase)

    def step(self, true_s: float, state: dict) -> float:
        n = self.noise
        innovation = n.sd * math.sqrt(1 - n.phi**2)
        state["ar"] = n.phi * state["ar"] + self.rng.gauss(0, innovation)
        drift = self.drift()
        seconds = true_s * math.exp(state["level"] + state["ar"] + drift)
        if self.rng.random() < n.outliers:
            seconds *= self.rng.uniform(1.5, 3.0)
        self.t += seconds
        return seconds


class SimulatedTrainer:
    """Stands in for jobs/trainer.py: one repeat is one simulated process in which the arms
    take turns (engine/rounds.py) and are timed by their StepClocks (engine/timing.py)."""

    def __init__(self, machine: Machine, truth: dict[str, float]):
        self.machine, self.truth, self.fewest = machine, truth, math.inf
        self.drifts: dict[str, list[float]] = {}  # the drift each process's timed steps saw

    def repeat(self, prepared, repeat: int, runs: list[Run]) -> RepeatResult:
        names = [r.policy.name for r in runs]
        train = runs[0].train
        turns = Rounds(names, train.round_samples, train.round_seconds)
        clocks = {
            r.policy.name: StepClock(
                train.warmup_steps, train.timed_steps, train.min_timed_steps,
                train.time_budget_s / train.repeats, now=self.machine.now,
            )
            for r in runs
        }  # fmt: skip
        states = self.machine.process(names)
        self.machine.t += 8.0  # starting the process and the framework
        while turns.live:
            arm = turns.current
            clock = clocks[arm]
            clock.batch_begin()
            warm = clock.step < train.warmup_steps
            drift = self.machine.drift()
            self.machine.step(self.truth[arm] * (3 if warm else 1), states[arm])
            after_turn(clock, turns, arm, clock.batch_end(0.0))
            if clock.last_timed:
                states[arm].setdefault("drifts", []).append(drift)
        process = f"p{repeat}-{self.machine.rng.random():.9f}"
        arms = []
        for name, clock in clocks.items():
            self.fewest = min(self.fewest, len(clock.step_seconds))
            self.drifts.setdefault(name, []).append(statistics.fmean(states[name]["drifts"]))
            arms.append(ArmResult(repeat, name, {}, outcome="ok", step_s=clock.step_seconds,
                                  rounds=clock.rounds, process=process))  # fmt: skip
        return RepeatResult(process, arms)


def runs_for(policies: list[str]) -> list[Run]:
    """The default train settings (conf/train/benchmark.yaml), for a group of policies."""
    cfg = compose_config(ROOT / "conf", None, ["policy=[float32]"])
    base = run_config(
        cfg, Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", "float32", 32)
    )
    return [
        replace(base, policy=Policy(name, "float32", baseline=i == 0))
        for i, name in enumerate(policies)
    ]


def experiment(noise: Noise, rng: random.Random, runs: list[Run], speedup: float) -> dict:
    truth = {runs[0].policy.name: STEP_S, runs[1].policy.name: STEP_S / speedup}
    trainer = SimulatedTrainer(Machine(noise, rng), truth)
    with contextlib.redirect_stdout(io.StringIO()):  # what a job would log
        measured = repeats.measure(trainer, "unused", runs)
    base = measured.results[runs[0].policy.name]
    step = stats.step_estimate([r.step_s for r in base])
    # The step while it was measured: the same machine, minus what changes between processes.
    window = STEP_S * math.exp(statistics.fmean(trainer.drifts[runs[0].policy.name]))
    first = runs[0].train.repeats
    found = repeats.speedups(measured.results, runs, first)[runs[1].policy.name]
    return {
        "step_covered": step.low <= STEP_S <= step.high,
        "window_covered": step.low <= window <= step.high,
        "speedup_covered": found.low <= speedup <= found.high,
        "verdict": stats.verdict(found),
        "half_width": found.half_width,
        "processes": measured.repeats,
        "fewest": trainer.fewest,
    }


# ---- the method before (for the closing comparison): each cell in its own job, 2 processes,
# each stopped once a bootstrap said its median was known to ±2% (at least 3 steps), a
# two-level percentile bootstrap for the step and independent bootstraps for the ratio.


def _bootstrap(repeats: list[list[float]], rng, n: int = 2000):
    import numpy as np

    arrays = [np.asarray(r) for r in repeats]
    k = len(arrays)
    picks = rng.integers(0, k, size=(n, k)) if k > 1 else np.zeros((n, 1), dtype=int)
    medians = np.empty((n, k))
    for j, steps in enumerate(arrays):
        medians[:, j] = np.median(steps[rng.integers(0, len(steps), size=(n, len(steps)))], 1)
    return np.median(np.take_along_axis(medians, picks, axis=1), axis=1)


def _old_process(machine: Machine, true_s: float, rng) -> list[float]:
    import numpy as np

    state = machine.process(["a"])["a"]
    machine.t += 8.0
    steps = []
    for _ in range(2):
        machine.step(true_s * 3, state)  # warm-up
    while len(steps) < 100:
        steps.append(machine.step(true_s, state))
        if len(steps) >= 3:
            lo, hi = np.percentile(_bootstrap([steps], rng, 400), [2.5, 97.5])
            if (hi - lo) / 2 / statistics.median(steps) <= 0.02:
                break
    return steps


def old_experiment(noise: Noise, rng: random.Random, speedup: float) -> dict:
    import numpy as np

    machine, nprng = Machine(noise, rng), np.random.default_rng(rng.randrange(2**32))
    base = [_old_process(machine, STEP_S, nprng) for _ in range(2)]
    other = [_old_process(machine, STEP_S / speedup, nprng) for _ in range(2)]
    b, o = _bootstrap(base, nprng), _bootstrap(other, nprng)
    lo, hi = np.percentile(b, [2.5, 97.5])
    rlo, rhi = np.percentile(b / o, [2.5, 97.5])
    verdict = "faster" if rlo > 1 else "slower" if rhi < 1 else "no measurable difference"
    return {
        "step_covered": lo <= STEP_S <= hi, "window_covered": lo <= STEP_S <= hi,
        "speedup_covered": rlo <= speedup <= rhi, "verdict": verdict,
        "half_width": (rhi - rlo) / 2 / (statistics.median(b) / statistics.median(o)),
        "processes": 2, "fewest": min(len(s) for s in base + other),
    }  # fmt: skip


def table(noises: list[Noise], count: int, seed: int, before: bool = False) -> list[str]:
    aa, ab = runs_for(["float32", "float32_copy"]), runs_for(["float32", "faster"])
    lines = [
        f"{'noise model':<20}{'step cov.':>10}{'(window)':>10}{'speedup cov.':>13}"
        f"{'A/A false':>11}{'half-width':>11}{'processes':>10}{'fewest steps':>13}",
    ]
    for noise in noises:
        rng = random.Random(seed)
        if before:
            nulls = [old_experiment(noise, rng, 1.0) for _ in range(count)]
            effects = [old_experiment(noise, rng, TRUE_SPEEDUP) for _ in range(count)]
        else:
            nulls = [experiment(noise, rng, aa, 1.0) for _ in range(count)]
            effects = [experiment(noise, rng, ab, TRUE_SPEEDUP) for _ in range(count)]
        both = nulls + effects
        false = f"{100 * sum(r['verdict'] in ('faster', 'slower') for r in nulls) / count:.1f}%"
        width = f"{100 * statistics.median(r['half_width'] for r in both):.1f}%"
        lines.append(
            f"{noise.name:<20}{_share(both, 'step_covered'):>10}"
            f"{_share(both, 'window_covered'):>10}"
            f"{_share(both, 'speedup_covered'):>13}{false:>11}{width:>11}"
            f"{statistics.mean(r['processes'] for r in both):>10.2f}"
            f"{min(r['fewest'] for r in both):>13}"
        )
    return lines


def _share(results: list[dict], key: str) -> str:
    return f"{100 * sum(r[key] for r in results) / len(results):.1f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=400, help="per noise model and arm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before", action="store_true",
                        help="the method before paired rounds, for comparison")  # fmt: skip
    args = parser.parse_args(argv)
    started = time.monotonic()
    print(f"{args.experiments} A/A and {args.experiments} A/B ({TRUE_SPEEDUP}x) comparisons per "
          f"noise model; true step {1000 * STEP_S:.0f} ms; nominal 95% intervals")  # fmt: skip
    if args.before:
        print("the method before: 2 processes per cell, a bootstrap stop at ±2%, bootstraps")
    for line in table(NOISES, args.experiments, args.seed, args.before):
        print(line, flush=True)
    print(f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
