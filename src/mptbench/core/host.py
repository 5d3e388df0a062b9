"""How much slower than its own the host ran while a cell was timed, and what that does to the
cell's intervals.

Each process times a fixed kernel between its arms' turns (engine/host.py); its fastest
sample is the process's `host_ms`. Set against the fastest any process of the same host, build
and device ran it (the train job's own processes and every earlier run's: jobs/host.py keeps
it), a process's slowdown is host_ms / fastest. On a quiet host they stay within 20%.

A busy spell that falls on some of a cell's processes and not others is spread between them,
which the cell's t interval over processes sees (and the train job spreads each cell's
processes in time for that: jobs/series.py). A slowdown that *every* process of the cell
shared is seen by no interval over processes: a load that adds about the same time to each
step shrinks a speedup whatever the pairing does. So each of the cell's intervals is widened,
on the log scale, by what its least slowed process lost beyond HOST_TOLERANCE: a bound, where
the load stretches each policy's step by a factor between 1 and the kernel's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# The kernel runs inside training processes, beside their own threads: on a quiet 2-core host
# the default grid's processes read it a little slower than the fastest, more where the input
# pipeline decodes all the time, and one neighbour thread far slower (bench/README.md,
# bench_precision.py). A slowdown within 20% is the host's own noise.
HOST_TOLERANCE = 0.20


@dataclass(frozen=True)
class Slowdown:
    """A cell's processes against the host's fastest: their geometric mean, the least and the
    most, and the widening (log) its intervals take."""

    mean: float
    least: float
    most: float
    fastest_ms: float

    @property
    def widening(self) -> float:
        return max(0.0, math.log(self.least) - math.log1p(HOST_TOLERANCE))

    @property
    def moved(self) -> bool:
        """Whether any of its processes ran slower than the tolerance allows."""
        return self.most > 1 + HOST_TOLERANCE


def slowdown(host_ms: Sequence[float], fastest_ms: float | None) -> Slowdown | None:
    """The processes' slowdowns against `fastest_ms`; None without both."""
    found = [h for h in host_ms if h and h > 0]
    if not found or not fastest_ms or fastest_ms <= 0:
        return None
    each = [max(1.0, h / fastest_ms) for h in found]
    mean = math.exp(sum(math.log(s) for s in each) / len(each))
    return Slowdown(mean, min(each), max(each), fastest_ms)
