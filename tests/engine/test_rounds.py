"""Turns in rounds: every arm one turn a round, the order rotating, and an arm that leaves
(done or failed) never holds the others up, in one thread or many."""

import threading

import pytest

from mptbench.engine.rounds import Rounds


def _play(turns: Rounds, steps: dict[str, int]) -> list[tuple[str, int]]:
    """Each arm runs `steps[arm]` timed samples, taking turns; (arm, round) per sample."""
    played, left = [], dict(steps)
    while turns.live:
        arm = turns.current
        left[arm] -= 1
        played.append((arm, turns.end(arm, timed=True, seconds=0.1, done=left[arm] == 0)))
    return played


def test_each_round_gives_every_arm_one_turn_in_a_rotating_order():
    played = _play(Rounds(["a", "b", "c"], samples=2), {"a": 6, "b": 6, "c": 6})
    arms = "".join(a for a, _ in played)
    assert arms == "aabbcc" + "bbccaa" + "ccaabb"
    assert [r for _, r in played] == [0] * 6 + [1] * 6 + [2] * 6


def test_an_arm_that_is_done_leaves_the_rotation():
    played = _play(Rounds(["a", "b"], samples=2), {"a": 2, "b": 6})
    assert "".join(a for a, _ in played) == "aabbbbbb"
    assert [r for a, r in played if a == "b"] == [0, 0, 1, 1, 2, 2]


def test_a_turn_ends_after_its_seconds_with_one_sample_at_least():
    turns = Rounds(["a", "b"], samples=5, seconds=1.0)
    assert turns.end("a", timed=True, seconds=3.0) == 0 and turns.current == "b"
    turns.end("b", timed=False, seconds=9.0)  # warm-up counts toward nothing
    assert turns.current == "b"


def test_the_arm_whose_turn_it_is_is_announced():
    announced = []
    turns = Rounds(["a", "b"], samples=1, on_turn=announced.append)
    turns.end("a", timed=True)
    turns.leave("b")
    assert announced == ["a", "b", "a"]


def test_between_turns_runs_as_each_turn_passes_before_the_next_arm_begins():
    """What engine/host.py times the host's speed in: after every turn, while no arm runs."""
    seen = []
    turns = Rounds(["a", "b"], samples=2, between_turns=lambda: seen.append(turns.current))
    played = _play(turns, {"a": 4, "b": 4})
    # A turn passed 3 times with arms left to run (the last end leaves none), each time seen
    # with the arm about to begin named, under the lock its begin waits on.
    assert "".join(a for a, _ in played) == "aabbbbaa" and seen == ["b", "b", "a"]


@pytest.mark.parametrize("fails", [None, "b"])
def test_threads_take_turns_and_one_that_fails_holds_no_one_up(fails):
    turns = Rounds(["a", "b", "c"], samples=3)
    log, lock = [], threading.Lock()

    def arm(name):
        try:
            for i in range(9):
                turns.begin(name)
                if name == fails and i == 4:
                    raise RuntimeError("out of memory")
                with lock:
                    log.append(name)
                turns.end(name, timed=True, done=i == 8)
        except RuntimeError:
            pass
        finally:
            turns.leave(name)

    threads = [threading.Thread(target=arm, args=(n,)) for n in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert log.count("a") == 9 and log.count("c") == 9
    assert log.count("b") == (4 if fails else 9)
    assert "".join(log[:9]) == "aaabbbccc"  # one arm at a time, a turn after another


def test_an_arm_done_timing_waits_until_every_arm_has_left():
    """What fit does after its last step (Keras validates then) never runs beside another
    arm's timed steps: the arm done first waits in wait_done until the last has left."""
    turns = Rounds(["a", "b"], samples=1)
    events = []

    def a():
        turns.begin("a")
        turns.end("a", timed=True, done=True)
        turns.wait_done()
        events.append("a after its fit")

    def b():
        for _ in range(3):
            turns.begin("b")
            events.append("b step")
            turns.end("b", timed=True)
        turns.leave("b")

    threads = [threading.Thread(target=f) for f in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert events == ["b step"] * 3 + ["a after its fit"]
