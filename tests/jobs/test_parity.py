"""Does it still learn: a policy's end loss against the baseline's and its seed-to-seed spread."""

import json
import sys
from dataclasses import replace

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import ParityRun, ProbePoint, ProbeResult
from mptbench.jobs.parity import (
    end_loss,
    fastest_batches,
    measured_steps,
    parity,
    plan,
    verdict,
)


def _run(policy, losses, seed=0, **kw):
    return ParityRun(policy=policy, seed=seed, losses=losses, **kw)


FALLING = [2.0 - i / 100 for i in range(100)]  # 2.00 down to 1.01; the last ten average 1.055


def test_the_end_is_the_mean_of_the_last_tenth():
    assert end_loss(FALLING) == pytest.approx(sum(FALLING[-10:]) / 10)
    assert end_loss([*FALLING[:-1], None]) is None


def test_within_the_baselines_own_spread_it_follows():
    base, spread = _run("float32", FALLING), _run("float32", [v + 0.05 for v in FALLING], 1)
    mixed = _run("mixed_float16", [v + 0.02 for v in FALLING], loss_scale=[32768.0] * 100,
                 initial_loss_scale=32768.0)
    found = verdict(mixed, base, spread)
    assert found["verdict"] == "follows the baseline"
    assert abs(found["gap"] - 0.02) < 1e-9 and abs(found["seed_spread"] - 0.05) < 1e-9
    assert found["skipped_steps"] == 0 and found["final_loss_scale"] == 32768.0


def test_beyond_it_the_policy_ends_higher():
    base, spread = _run("float32", FALLING), _run("float32", [v + 0.01 for v in FALLING], 1)
    found = verdict(_run("mixed_bfloat16", [v + 0.2 for v in FALLING]), base, spread)
    assert found["verdict"] == "ends higher" and abs(found["gap"] - 0.2) < 1e-9


def test_a_loss_that_stops_being_finite_or_rises_while_the_baselines_falls_diverged():
    base, spread = _run("float32", FALLING), _run("float32", FALLING, 1)
    blown = _run("mixed_float16", [*FALLING[:40], None, *FALLING[41:]], skipped_steps=[40])
    found = verdict(blown, base, spread)
    assert found["verdict"] == "diverged" and found["first_nonfinite_step"] == 40
    rising = verdict(_run("mixed_float16", FALLING[::-1]), base, spread)
    assert rising["verdict"] == "diverged" and "rose" in rising["why"]


def _group(policies, **model):
    runs = []
    for name in policies:
        run = smoke_cell_run(policy=name.split(":")[0], batch_size=8)
        if model:
            run = replace(run, model=replace(run.model, **model))
        runs.append(run)
    return runs


@pytest.mark.slow
def test_a_huge_initial_loss_scale_is_recorded_as_skipped_steps(tmp_path, prepared16):
    base, mixed = _group(["float32", "mixed_float16"])
    mixed = replace(mixed, policy=replace(mixed.policy, initial_loss_scale=2.0**40))
    (tmp_path / "p.json").write_text(json.dumps(prepared16))
    found = parity(sys.executable, [base, mixed], str(tmp_path / "p.json"),
                   str(tmp_path / "parity.json"), steps=10)
    figures = found["policies"]["mixed_float16"]
    # 2**40 overflows float16's gradients: each step skipped, the scale halved each time (it
    # takes about 25 halvings to fit, more steps than this test pays for).
    assert figures["initial_loss_scale"] == 2.0**40
    assert figures["skipped_steps"] >= 5 and figures["min_loss_scale"] < 2.0**40
    run = next(r for r in found["runs"] if r["policy"] == "mixed_float16")
    assert run["loss_scale"][run["skipped_steps"][0]] < 2.0**40
    assert found["policies"]["float32"]["verdict"] == "baseline"


@pytest.mark.slow
def test_a_learning_rate_that_overflows_float16_is_reported_as_diverging(tmp_path, prepared16):
    runs = _group(["float32", "mixed_float16"], optimizer="sgd", learning_rate=1e4)
    (tmp_path / "p.json").write_text(json.dumps(prepared16))
    found = parity(sys.executable, runs, str(tmp_path / "p.json"), str(tmp_path / "parity.json"),
                   steps=10)
    figures = found["policies"]["mixed_float16"]
    assert figures["verdict"] == "diverged", figures


def test_a_policy_whose_probe_was_refused_is_left_out_with_the_probes_words():
    runs = [smoke_cell_run("float32"), smoke_cell_run("mixed_bfloat16")]
    refused = ProbeResult("tensorflow", "pypi", "cpu", "mixed_bfloat16", 16, [],
                          outcome="unsupported", reason="oneDNN: could not create a primitive")
    chosen = plan(runs, 30, None, {"mixed_bfloat16": refused})
    assert [r.policy.name for r in chosen.kept] == ["float32"]
    assert chosen.left_out == {
        "mixed_bfloat16": "its probe: unsupported: oneDNN: could not create a primitive"}


class Launched(Exception):
    """What the fake engine raises once it has noted the job it was given."""


def _launches(monkeypatch) -> list[tuple[int, list[str]]]:
    """Each parity job the engine is given, as (steps, its runs' policies): none is run."""
    launched = []

    class Engine:
        def __init__(self, python, env):
            pass

        def launch(self, job, result, limit):
            launched.append((job.steps, [r.policy.name for r in job.runs]))
            raise Launched

    monkeypatch.setattr("mptbench.jobs.parity.Engine", Engine)
    return launched


def _timed(policy, batch, images_per_sec, outcome="ok", fits=True):
    return {"policy": policy, "batch_size": batch, "images_per_sec": images_per_sec,
            "outcome": outcome, "fits_at_batch": fits}


def test_under_the_fast_plan_a_policy_is_checked_at_its_fastest_batch_alone(
        tmp_path, monkeypatch):
    """The answer names a policy at its fastest batch: the check runs there and nowhere else;
    a cell that failed or did not fit is no candidate, and a group with no candidate left is
    not run at all, saying why policy by policy."""
    records = [_timed("float32", 4, 150.0), _timed("float32", 8, 210.0),
               _timed("mixed_float16", 4, 160.0), _timed("mixed_float16", 8, 205.0),
               _timed("mixed_bfloat16", 4, 120.0), _timed("mixed_bfloat16", 8, 900.0, fits=False),
               _timed("mixed_bfloat16", 16, 990.0, outcome="oom")]
    assert fastest_batches(records) == {"float32": 8, "mixed_float16": 8, "mixed_bfloat16": 4}
    # Without the search's word at a batch, one above the largest that fit does not fit.
    beyond = {"policy": "mixed_float16", "batch_size": 16, "images_per_sec": 999.0,
              "outcome": "ok", "largest_fit_batch": 8}
    assert fastest_batches([*records, beyond])["mixed_float16"] == 8
    assert fastest_batches([*records, beyond | {"largest_fit_batch": 16}])["mixed_float16"] == 16
    at = {b: [smoke_cell_run(p, batch_size=b) for p in
              ("float32", "mixed_float16", "mixed_bfloat16")] for b in (4, 8)}
    fastest = fastest_batches(records)
    chosen = plan(at[8], 30, None, {}, fastest)
    assert [r.policy.name for r in chosen.kept] == ["float32", "mixed_float16"]
    assert chosen.left_out == {"mixed_bfloat16": "not the answer's candidate: its fastest batch "
                               "in the timing is 4 (train.plan=full checks every group)"}
    chosen = plan(at[4], 30, None, {}, fastest)
    assert [r.policy.name for r in chosen.kept] == ["float32", "mixed_bfloat16"]
    assert list(chosen.left_out) == ["mixed_float16"]
    # No candidate in the group: nothing is trained, and the file says why.
    lone = fastest | {"mixed_bfloat16": 8}
    assert [r.policy.name for r in plan(at[4], 30, None, {}, lone).kept] == ["float32"]
    out = tmp_path / "parity.json"
    found = parity("no-such-python", at[4], "unused.json", str(out), steps=30,
                   records=[*records[:5], _timed("mixed_bfloat16", 8, 300.0)])
    assert found["outcome"].startswith("not run: mixed_float16: not the answer's candidate")
    assert json.loads(out.read_text())["left_out"].keys() == {"mixed_float16", "mixed_bfloat16"}
    # The full plan checks every group whatever the timing said: all three are trained.
    full = [replace(r, train=replace(r.train, plan="full")) for r in at[4]]
    launched = _launches(monkeypatch)
    with pytest.raises(Launched):
        parity("python", full, "unused.json", str(out), steps=30, records=records)
    assert [names for _, names in launched] == [
        ["float32", "mixed_float16", "mixed_bfloat16", "float32"]]


def test_a_run_over_the_budget_trains_as_many_steps_as_fit_and_says_so(tmp_path, monkeypatch):
    """train.parity_steps over train.parity_budget_s: the group trains as many steps as its
    slowest run fits, by its step in the timing where one was timed (else the probe's
    prediction), and its file says why; a run that cannot fit MIN_STEPS is left out."""
    runs = [smoke_cell_run(p, batch_size=8) for p in ("float32", "mixed_float16")]
    probe = ProbeResult("tensorflow", "pypi", "cpu", "mixed_float16", 16,
                        [ProbePoint(4, 0.5, [0.5], 0.5), ProbePoint(8, 1.0, [1.0], 1.0)])
    timed = [_timed("float32", 8, 40.0) | {"ms_per_step": 200.0},
             _timed("mixed_float16", 8, 16.0) | {"ms_per_step": 500.0}]
    # 60 s fits 120 of float32's 0.2 s steps and 120 of mixed_float16's 0.5 s.
    chosen = plan(runs, 200, 60, {"mixed_float16": probe}, None, measured_steps(timed))
    assert [r.policy.name for r in chosen.kept] == ["float32", "mixed_float16"]
    assert chosen.steps == 120 and chosen.left_out == {}
    assert chosen.shortened == (
        "120 steps, not train.parity_steps=200: mixed_float16's 200 would take 100 s (its timed "
        "step: 0.50 s a step) > train.parity_budget_s=60")
    # Untimed, the probe predicts 1.0 s a step at batch 8: 60 steps fit.
    untimed = plan(runs, 200, 60, {"mixed_float16": probe})
    assert untimed.steps == 60 and "the probe's prediction: 1.00 s a step" in untimed.shortened
    # Within the budget, the steps asked.
    assert plan(runs, 100, 60, {}, None, measured_steps(timed)).shortened is None
    # Under MIN_STEPS (20) in the budget: left out, and the group is not run.
    tight = plan(runs, 200, 8, {"mixed_float16": probe}, None, measured_steps(timed))
    assert [r.policy.name for r in tight.kept] == ["float32"] and tight.steps == 40
    assert tight.left_out == {"mixed_float16": "20 steps would take 10 s (its timed step: 0.50 "
                                               "s a step) > train.parity_budget_s=8"}
    # What the parity job trains and writes.
    launched = _launches(monkeypatch)
    with pytest.raises(Launched):
        parity("python", runs, "unused.json", str(tmp_path / "p.json"), steps=200, budget_s=60,
               probes={"mixed_float16": probe}, records=timed)
    assert launched == [(120, ["float32", "mixed_float16", "float32"])]
