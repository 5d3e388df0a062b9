"""Turns in rounds: the policies of one comparison group, timed in one process, take turns.

In round r every arm still timing runs one turn, in an order that rotates each round (AB, BA,
AB, ...; ABC, BCA, CAB, ...), so slow drift and whatever the process does to the machine fall
on every arm alike, and a round's medians can be compared arm against arm (core/stats.py).
A turn is `samples` timed samples, or as many as fit in `seconds` (at least one), whichever
ends first; an arm's warm-up comes first in its first turn and is not counted.

Framework-free and thread-safe: in the engine each arm's Keras fit runs in its own thread and
calls `begin` before and `end` after each sample (a step, or a block of steps), and `leave`
when it stops; the simulation (bench/bench_coverage.py) calls them in order from one thread.
`between_turns`, where given, runs as a turn passes to the next arm, before that arm may begin:
while no arm computes (engine/host.py times the host's own speed there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Rounds:
    def __init__(
        self,
        arms: list[str],
        samples: int,
        seconds: float | None = None,
        on_turn: Callable[[str], None] | None = None,
        between_turns: Callable[[], None] | None = None,
    ):
        if not arms:
            raise ValueError("no arm to time")
        self.arms, self.samples, self.seconds = list(arms), max(1, samples), seconds
        self.live = list(arms)
        self.round = 0
        self.turns = 0  # turns ended so far: one arm alone also ends its turns
        self._queue = list(arms)  # this round's arms still to take their turn, current first
        self._timed = 0
        self._timed_s = 0.0
        self._on_turn = on_turn
        self._between = between_turns
        self._cv = threading.Condition()
        if on_turn:
            on_turn(self._queue[0])

    @property
    def current(self) -> str | None:
        return self._queue[0] if self._queue else None

    def order(self, round_: int) -> list[str]:
        """The arms still timing, in round `round_`'s order."""
        k = round_ % len(self.arms)
        rotated = self.arms[k:] + self.arms[:k]
        return [a for a in rotated if a in self.live]

    def begin(self, arm: str) -> None:
        """Wait for `arm`'s turn."""
        with self._cv:
            self._cv.wait_for(lambda: self.current == arm or arm not in self.live)

    def end(self, arm: str, timed: bool, seconds: float = 0.0, done: bool = False) -> int:
        """A sample of `arm` ended (timed or warm-up); the round it belongs to. With `done`,
        the arm has what it needs and leaves."""
        with self._cv:
            round_ = self.round
            if timed:
                self._timed += 1
                self._timed_s += seconds
            full = self._timed >= self.samples or (
                self.seconds is not None and self._timed and self._timed_s >= self.seconds
            )
            if done:
                self._leave(arm)
            elif full and self.current == arm:
                self._next()
            return round_

    def wait_done(self) -> None:
        """Wait until every arm has left: an arm done timing waits here before its `fit` goes
        on (Keras validates after the step that stops it), so nothing it does afterwards runs
        beside another arm's timed steps."""
        with self._cv:
            self._cv.wait_for(lambda: not self.live)

    def leave(self, arm: str) -> None:
        """`arm` stops timing (it is done, or it failed): the others go on without it."""
        with self._cv:
            self._leave(arm)

    def _leave(self, arm: str) -> None:
        if arm not in self.live:
            return
        was_current = self.current == arm
        self.live.remove(arm)
        if was_current:
            self._next()
        else:
            self._queue = [a for a in self._queue if a != arm]
        self._cv.notify_all()

    def _next(self) -> None:
        """The current turn is over: the next arm of this round, or the next round."""
        self._queue = [a for a in self._queue[1:] if a in self.live]
        if not self._queue and self.live:
            self.round += 1
            self._queue = self.order(self.round)
        self._timed, self._timed_s = 0, 0.0
        self.turns += 1
        if self._queue and self._between:
            self._between()
        if self._queue and self._on_turn:
            self._on_turn(self._queue[0])
        self._cv.notify_all()
