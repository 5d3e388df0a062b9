"""The host's own speed while a group is timed: a fixed float32 matmul (the calibration's
kernel, engine/kernels.py, at device.<kind>.host_check.size) timed before the arms start,
between their turns and after, in the process that times them.

Steal time counts only what the hypervisor takes; a neighbour on the same core's other
hyperthread, or on the memory bus, slows every step with none stolen. The kernel slows with
them, so its time, set against the fastest any process of the same host, build and device
recorded, says how much slower than its own the host ran (core/host.py). It runs between two
turns, while no arm computes, and at most every `seconds`: at the default 1024 x 1024 on 2
cores three calls of about 8 ms every 4 s, under 1% of the timed steps.
"""

from __future__ import annotations

import time
from typing import Any

from mptbench.engine.kernels import kernels as kernels_of


def _read(value: Any) -> float:
    """A kernel's scalar read back to the host, so its time covers finished device work."""
    item = getattr(value, "item", None)
    return float(item() if callable(item) else value)


class HostCheck:
    """Samples of the kernel's time, in seconds, each the fastest of `calls` calls after one
    untimed: right after a turn the framework's own threads still spin for a while (a sample
    there read 20% slow on a quiet host), and a neighbour's load slows every call alike."""

    def __init__(self, session, settings: dict[str, Any], now=time.perf_counter):
        self.size, self.calls = int(settings["size"]), int(settings["calls"])
        self.seconds = float(settings["seconds"])
        self._now = now
        self._step = kernels_of(session.name, session.framework).matmul("float32", self.size)
        _read(self._step())  # the first call traces and compiles: no sample
        self.samples: list[float] = []
        self._last: float | None = None

    def sample(self) -> float:
        _read(self._step())
        times = []
        for _ in range(self.calls):
            started = self._now()
            _read(self._step())
            times.append(self._now() - started)
        self._last = self._now()
        self.samples.append(min(times))
        return self.samples[-1]

    def process_ms(self) -> float:
        """The process's host_ms: its fastest sample. Inside a training process the kernel
        shares the cores with the process's own threads (its input pipeline filling its
        prefetch buffer between turns, the framework's pools): on a quiet host single samples
        read up to 2.2x slow (7.5 ms fastest, 17 ms at times, 256 px at batch 128), and their
        median was 9-10 ms. A neighbour that stays for the whole process slows every sample,
        the fastest too; one that comes and goes is spread between processes."""
        return 1000 * min(self.samples)

    def between_turns(self) -> None:
        """A sample, where the last is at least `seconds` old."""
        if self._last is None or self._now() - self._last >= self.seconds:
            self.sample()
