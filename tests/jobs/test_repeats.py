"""How many processes a group is timed in: the first stage, then as many as its spread asks
for; a death blamed on the arm whose turn it was."""

import math
from dataclasses import replace

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import ArmResult, RepeatResult
from mptbench.core.policies import Policy
from mptbench.core.stats import half_width_after, verdict
from mptbench.jobs.host import Reference
from mptbench.jobs.repeats import futile, measure, measure_series, processes_why, speedups
from mptbench.jobs.series import _why_no_more
from mptbench.jobs.trainer import Death


def _runs(*policies, **train):
    base = smoke_cell_run(**train)
    return [replace(base, policy=Policy(p, "float32", baseline=i == 0))
            for i, p in enumerate(policies)]


class Trainer:
    """Repeats from a script: each process's steps per arm (and its host_ms under "host"), or
    a death; `log` gets (name, repeat) for every process, in the order they ran."""

    def __init__(self, script, name="", log=None):
        self.script, self.calls, self.name = list(script), [], name
        self.log = [] if log is None else log

    def repeat(self, prepared, repeat, runs):
        self.calls.append([r.policy.name for r in runs])
        self.log.append((self.name, repeat))
        step = self.script.pop(0)
        if isinstance(step, Death):
            return step
        host = {"host_ms": step["host"]} if "host" in step else {}
        arms = [ArmResult(repeat, r.policy.name, {}, outcome="ok", step_s=step[r.policy.name],
                          rounds=[0] * len(step[r.policy.name]), process=f"{self.name}p{repeat}",
                          measured=dict(host))
                for r in runs]
        return RepeatResult(f"{self.name}p{repeat}", arms)


def _process(base, other):
    return {"a": [base] * 4, "b": [other] * 4}


def test_a_tight_first_stage_stops_at_the_repeats():
    runs = _runs("a", "b", repeats=3, max_repeats=6, precision=0.03)
    trainer = Trainer([_process(1.0, 0.5), _process(1.1, 0.55), _process(0.9, 0.451)])
    measured = measure(trainer, "p.json", runs)
    assert measured.repeats == 3 and len(trainer.calls) == 3
    assert math.isclose(speedups(measured.results, runs, 3)["b"].value, 2.0, rel_tol=1e-2)


def test_a_spread_first_stage_asks_for_more_processes_up_to_the_most():
    # ±3% from process to process: ±7.4% after 3, Stein wants 19 for ±3%; 5 give ±5.7%.
    runs = _runs("a", "b", repeats=3, max_repeats=5, precision=0.03)
    trainer = Trainer([_process(1.0, 0.97), _process(1.0, 1.03), _process(1.0, 1.0)] * 2)
    measured = measure(trainer, "p.json", runs)
    assert measured.repeats == 5  # Stein's plan wanted more than 5: capped
    first = speedups({k: v[:3] for k, v in measured.results.items()}, runs)["b"]
    found = speedups(measured.results, runs, 3)["b"]
    assert processes_why(first, found, runs[0].train) == "most"
    assert processes_why(first, found, runs[0].train, host_asked=True) == "host"


def test_an_added_process_that_is_far_off_widens_the_speedup_beyond_the_plan():
    """±3% in the first three processes: two more were planned, their interval ±5.7%; the
    last of them has the policy 30% slower. The speedup's interval takes that spread, wider
    than planned, and the group does not call the policy slower on one process."""
    runs = _runs("a", "b", repeats=3, max_repeats=5, precision=0.03)
    trainer = Trainer([_process(1.0, 0.97), _process(1.0, 1.03), _process(1.0, 1.0),
                       _process(1.0, 1.0), _process(1.0, 1.43)])
    measured = measure(trainer, "p.json", runs)
    assert measured.repeats == 5
    first = speedups({k: v[:3] for k, v in measured.results.items()}, runs)["b"]
    found = speedups(measured.results, runs, 3)["b"]
    assert found.value < 0.95 and found.half_width > 2 * half_width_after(first, 5)
    assert verdict(found) == "no measurable difference"


def test_no_more_processes_where_even_the_most_would_stay_far_wider_than_asked():
    """±6% from process to process: 5 processes would still leave ±12%, over twice the 3%
    asked, so the first stage's interval is the answer and the group says why."""
    runs = _runs("a", "b", repeats=3, max_repeats=5, precision=0.03)
    trainer = Trainer([_process(1.0, 0.94), _process(1.0, 1.06), _process(1.0, 1.0)] * 2)
    measured = measure(trainer, "p.json", runs)
    assert measured.repeats == 3 and len(trainer.calls) == 3
    first = speedups(measured.results, runs, 3)["b"]
    assert futile(first, 0.03, 5) and not futile(first, 0.07, 5)
    assert half_width_after(first, 5) == pytest.approx(0.12, abs=0.01)
    assert "no more were run" in _why_no_more(first, first, runs[0].train)
    assert processes_why(first, first, runs[0].train) == "futile"


def test_a_first_stage_that_settled_its_verdict_asks_for_no_more_however_wide():
    # 2x faster, 1.82-2.22x in the first stage: wider than ±1%, but on one side of 1.
    runs = _runs("a", "b", repeats=3, max_repeats=5, precision=0.01)
    trainer = Trainer([_process(1.0, 0.5), _process(1.0, 0.55), _process(1.0, 0.45)] * 2)
    measured = measure(trainer, "p.json", runs)
    assert measured.repeats == 3 and len(trainer.calls) == 3
    found = speedups(measured.results, runs, 3)["b"]
    assert found.low > 1 and found.half_width > 0.01
    assert processes_why(found, found, runs[0].train) == "settled"
    # The same processes asked for ±50%: within it; with no precision asked: fixed.
    loose = replace(runs[0].train, precision=0.5)
    assert processes_why(found, found, loose) == "precise"
    assert processes_why(found, found, replace(loose, precision=None)) == "fixed"
    assert processes_why(None, None, loose) is None  # no speedup: the baseline alone


def test_one_policy_alone_needs_only_the_repeats():
    runs = _runs("a", repeats=2, max_repeats=5, precision=0.01)
    measured = measure(Trainer([{"a": [1.0]}, {"a": [2.0]}]), "p.json", runs)
    assert measured.repeats == 2


def test_a_death_is_blamed_on_the_arm_whose_turn_it_was_and_the_rest_go_on():
    runs = _runs("a", "b", repeats=2, max_repeats=2, precision=None)
    trainer = Trainer([Death("oom", "memory", "b"), {"a": [1.0]}, {"a": [1.1]}])
    measured = measure(trainer, "p.json", runs)
    assert measured.deaths["b"].outcome == "oom" and "a" not in measured.deaths
    assert trainer.calls == [["a", "b"], ["a"], ["a"]] and len(measured.results["a"]) == 2


def test_a_series_spreads_each_groups_processes_among_the_others_in_a_drawn_order():
    """Three groups of 3 processes: every group's k-th process runs before any group's
    (k+1)-th, the order within each pass drawn anew, and each process's place is recorded."""
    runs = _runs("a", "b", repeats=3, max_repeats=3, precision=0.03)
    log: list = []
    trainers = [Trainer([_process(1.0, 0.5)] * 3, name, log) for name in "xyz"]
    found = measure_series([(t, runs) for t in trainers], "p.json", seed=1)
    assert [repeat for _, repeat in log] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    passes = [tuple(name for name, r in log if r == k) for k in range(3)]
    assert len(set(passes)) > 1  # not the same order every pass
    sequences = sorted(a.sequence for m in found for a in m.results["a"])
    assert sequences == list(range(9))


def test_a_host_that_ran_slower_than_the_interval_allows_gets_the_most_processes():
    """A tight speedup (±1%) whose first stage met the host at 1.5x its fastest in one
    process: the group runs up to max_repeats, so a later spell can show what it did."""
    runs = _runs("a", "b", repeats=3, max_repeats=5, precision=0.03)
    script = [_process(1.0, 0.5) | {"host": ms} for ms in (10.0, 15.0, 10.1, 10.0, 10.2)]
    trainer = Trainer(script)
    measured = measure(trainer, "p.json", runs, Reference(None))
    assert measured.repeats == 5
    steady = Trainer([_process(1.0, 0.5) | {"host": ms} for ms in (10.0, 10.3, 10.1)])
    assert measure(steady, "p.json", runs, Reference(None)).repeats == 3


def test_a_slowed_host_asks_no_more_processes_of_a_group_with_no_speedup():
    """The baseline alone (the other policies over budget): no speedup's interval for the
    host to mislead, so the slowdown is said and widens, and no process is added."""
    runs = _runs("a", repeats=3, max_repeats=5, precision=0.03)
    script = [{"a": [1.0] * 4, "host": ms} for ms in (10.0, 15.0, 10.1)]
    trainer = Trainer(script)
    assert measure(trainer, "p.json", runs, Reference(None)).repeats == 3
