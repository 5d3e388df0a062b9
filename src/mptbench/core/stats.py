"""Uncertainty of timings: 95% intervals of a median step and of a ratio of two, by bootstrap.

A cell may be measured in several processes (train.repeats); its step time is the median of
its repeats' medians, and the interval comes from a two-level bootstrap: repeats resampled,
then steps within each. With one repeat it covers the noise within that process only; with
two or more it also covers what changes from one process to the next (placement, warm caches,
other tenants), which on a shared machine is often the larger part.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0  # a fixed seed: the same steps always give the same interval


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _tails() -> tuple[float, float]:
    return 100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2


def estimate(repeats: Sequence[Sequence[float]]) -> float:
    """The median of the repeats' median steps."""
    return statistics.median(statistics.median(r) for r in repeats)


def _resampled(repeats: list[np.ndarray], rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` bootstrap replicates of `estimate`: repeats resampled, then steps within each."""
    k = len(repeats)
    picks = rng.integers(0, k, size=(n, k)) if k > 1 else np.zeros((n, 1), dtype=int)
    medians = np.empty((n, k))
    for j, steps in enumerate(repeats):
        draws = steps[rng.integers(0, len(steps), size=(n, len(steps)))]
        medians[:, j] = np.median(draws, axis=1)
    return np.median(np.take_along_axis(medians, picks, axis=1), axis=1)


def replicates(repeats: Sequence[Sequence[float]], seed: int = SEED, n: int = RESAMPLES):
    arrays = [np.asarray(r, dtype=float) for r in repeats if len(r)]
    if not arrays:
        raise ValueError("no timed steps")
    return _resampled(arrays, np.random.default_rng(seed), n)


def interval(repeats: Sequence[Sequence[float]], seed: int = SEED) -> tuple[float, float]:
    """95% interval of `estimate`."""
    lo, hi = np.percentile(replicates(repeats, seed), _tails())
    return float(lo), float(hi)


def ratio_interval(
    numerator: Sequence[Sequence[float]], denominator: Sequence[Sequence[float]]
) -> tuple[float, float]:
    """95% interval of estimate(numerator) / estimate(denominator), sampled independently."""
    top = replicates(numerator, seed=SEED)
    bottom = replicates(denominator, seed=SEED + 1)
    lo, hi = np.percentile(top / bottom, _tails())
    return float(lo), float(hi)


def half_width(steps: Sequence[float], seed: int = SEED, n: int = 400) -> float:
    """Half the 95% interval of one run's median step, relative to that median (0.02 = 2%)."""
    lo, hi = np.percentile(replicates([steps], seed, n), _tails())
    return float((hi - lo) / 2 / statistics.median(steps))
