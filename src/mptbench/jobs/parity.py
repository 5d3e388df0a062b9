"""Does it still learn: a comparison group's policies trained for train.parity_steps steps from
the same seed and data order as the baseline (engine/parity.py), and the baseline once more from
another seed, so that "within the baseline's own seed-to-seed spread" is a measured statement.

Each run's end loss is the mean of its last tenth of steps (5 at least). A policy
- diverged where its loss became non-finite, or it ended above where it started while the
  baseline did not;
- follows the baseline where its end differs from the baseline's by no more than the two
  baseline runs differ from each other;
- ends higher (or lower) otherwise, by the gap beside that spread.
Under dynamic loss scaling, the scale's path and the steps skipped for non-finite gradients are
kept beside. A run that train.parity_steps would take over train.parity_budget_s (by its cell's
step in the timing, else the probe's prediction) trains fewer steps, as many as fit (the group's
runs all train as many); one that could not fit even MIN_STEPS is left out, with why.

Under train.plan fast the check runs after the timing, for the answer's candidates alone: each
policy at its fastest batch (the configuration the answer would name for it), so a group none
of whose policies is at its fastest there is not run, and says why (train.plan=full checks
every group).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mptbench.core.contract import ParityJob, ParityResult, ParityRun, ProbeResult, Run, encode
from mptbench.core.files import write_json
from mptbench.core.outcomes import Outcome
from mptbench.core.record import fit_at
from mptbench.jobs import memory
from mptbench.jobs.budget import predict
from mptbench.jobs.launcher import Engine, run_environment

SPREAD_SEED = 1  # the baseline's second run: its seed is the experiment's plus this


def end_loss(losses: list[float | None]) -> float | None:
    """The mean of the last tenth of the steps (5 at least); None when any loss was not finite."""
    if not losses or any(v is None for v in losses):
        return None
    tail = losses[-max(5, len(losses) // 10) :]
    return statistics.fmean(tail)


def start_loss(losses: list[float | None]) -> float | None:
    head = [v for v in losses[: max(5, len(losses) // 10)] if v is not None]
    return statistics.fmean(head) if head else None


def verdict(run: ParityRun, baseline: ParityRun, spread: ParityRun | None) -> dict[str, Any]:
    """One policy's figures against the baseline's, and what they say."""
    end, base_end = end_loss(run.losses), end_loss(baseline.losses)
    figures: dict[str, Any] = {
        "end_loss": end,
        "start_loss": start_loss(run.losses),
        "baseline_end_loss": base_end,
        "skipped_steps": len(run.skipped_steps),
        "first_nonfinite_step": next((i for i, v in enumerate(run.losses) if v is None), None),
    }
    if run.loss_scale:
        figures |= {"initial_loss_scale": run.initial_loss_scale,
                    "final_loss_scale": run.loss_scale[-1],
                    "min_loss_scale": min(run.loss_scale)}
    spread_end = end_loss(spread.losses) if spread else None
    if base_end is not None and spread_end is not None:
        figures["seed_spread"] = abs(spread_end - base_end)
    if run.val_accuracy is not None and baseline.val_accuracy is not None:
        figures |= {"val_accuracy": run.val_accuracy,
                    "baseline_val_accuracy": baseline.val_accuracy}
        if spread and spread.val_accuracy is not None:
            figures["val_accuracy_seed_spread"] = abs(spread.val_accuracy - baseline.val_accuracy)
    if run.outcome != Outcome.OK:
        return figures | {"verdict": "failed", "why": f"{run.outcome}: {run.reason}"}
    if end is None:
        step = figures["first_nonfinite_step"]
        return figures | {"verdict": "diverged", "why": f"its loss was not finite at step {step}"}
    base_start = start_loss(baseline.losses)
    if end > figures["start_loss"] and (base_end is None or base_end <= (base_start or math.inf)):
        return figures | {
            "verdict": "diverged",
            "why": f"its loss rose from {figures['start_loss']:.3f} to {end:.3f} while the "
            "baseline's fell",
        }
    if base_end is None:
        return figures | {"verdict": "unclear", "why": "the baseline's own loss was not finite"}
    gap = end - base_end
    figures["gap"] = gap
    if "seed_spread" not in figures:
        return figures | {"verdict": "unclear", "why": "no second baseline run to compare with"}
    if abs(gap) <= figures["seed_spread"]:
        within = "within its seed-to-seed spread"
        return figures | {"verdict": "follows the baseline", "why": within}
    side = "higher" if gap > 0 else "lower"
    return figures | {"verdict": f"ends {side}", "why": "beyond its seed-to-seed spread"}


def fastest_batches(records: list[dict]) -> dict[str, int]:
    """Each policy's fastest batch among its series' cells that ran ok and fit (the most
    images per second): where the answer would name it."""
    best: dict[str, tuple[float, int]] = {}
    for record in records:
        speed = record.get("images_per_sec")
        fits = fit_at(record["batch_size"], record.get("fits_at_batch"),
                      record.get("largest_fit_batch"))
        if record.get("outcome") != Outcome.OK or fits is False or not speed:
            continue
        policy = record["policy"]
        if policy not in best or speed > best[policy][0]:
            best[policy] = (speed, int(record["batch_size"]))
    return {policy: batch for policy, (_, batch) in best.items()}


def not_candidate(run: Run, fastest: dict[str, int] | None) -> str | None:
    """Why a policy's parity run is not one of the answer's candidates (None: it is, or no
    records were given to tell)."""
    if fastest is None or run.policy.baseline:
        return None
    batch = fastest.get(run.policy.name)
    if batch is None:
        return "no cell of it ran ok and fit in the timing (train.plan=full checks it)"
    if batch != run.cell.batch_size:
        return (f"not the answer's candidate: its fastest batch in the timing is {batch} "
                "(train.plan=full checks every group)")
    return None


# The fewest steps a run over the budget is cut to: its start loss is the mean of its first 5
# steps and its end loss of its last 5, with 10 steps between them.
MIN_STEPS = 20


def measured_steps(records: list[dict] | None) -> dict[tuple[str, int], float]:
    """Each timed cell's mean step in seconds, by (policy, batch size)."""
    return {(r["policy"], int(r["batch_size"])): r["ms_per_step"] / 1000
            for r in records or [] if r.get("outcome") == Outcome.OK and r.get("ms_per_step")}


@dataclass(frozen=True)
class Plan:
    """The runs a group's check trains, for how many steps, and why any is left out."""

    kept: list[Run]
    left_out: dict[str, str]
    steps: int
    shortened: str | None = None  # why the runs train fewer than train.parity_steps


def plan(runs: list[Run], steps: int, budget_s: float | None,
         probes: dict[str, ProbeResult], fastest: dict[str, int] | None = None,
         step_s: dict[tuple[str, int], float] | None = None) -> Plan:
    """The runs that are the answer's candidates (given `fastest`, each policy's fastest
    batch) and that fit train.parity_budget_s in MIN_STEPS at least, by their cell's step in
    the timing (`step_s`), else their probe's prediction; as many steps as the slowest of them
    fits, train.parity_steps at most; and why others are left out."""
    kept, left_out, each = [], {}, {}
    for run in runs:
        name = run.policy.name
        if why := not_candidate(run, fastest):
            left_out[name] = why
            continue
        probe = probes.get(name)
        if probe and probe.outcome != Outcome.OK:
            left_out[name] = f"its probe: {probe.outcome}: {probe.reason}"
            continue
        seconds, source = (step_s or {}).get((name, run.cell.batch_size)), "its timed step"
        if seconds is None and probe and probe.points:
            seconds, source = predict(probe.points, run.cell.batch_size), "the probe's prediction"
        if budget_s and seconds:
            fit = int(budget_s / seconds)
            least = min(steps, MIN_STEPS)
            if fit < least:
                left_out[name] = (
                    f"{least} steps would take {least * seconds:.0f} s ({source}: "
                    f"{seconds:.2f} s a step) > train.parity_budget_s={budget_s}"
                )
                continue
            each[name] = (fit, seconds, source)
        kept.append(run)
    slowest = min(each.items(), key=lambda item: item[1][0], default=None)
    if slowest is None or slowest[1][0] >= steps:
        return Plan(kept, left_out, steps)
    name, (fit, seconds, source) = slowest
    return Plan(kept, left_out, fit, (
        f"{fit} steps, not train.parity_steps={steps}: {name}'s {steps} would take "
        f"{steps * seconds:.0f} s ({source}: {seconds:.2f} s a step) > "
        f"train.parity_budget_s={budget_s}"))


def parity(
    python: str,
    runs: list[Run],
    prepared: str,
    out: str,
    steps: int,
    budget_s: float | None = None,
    probes: dict[str, ProbeResult] | None = None,
    records: list[dict] | None = None,
) -> dict[str, Any]:
    """Train and compare the group's policies (the baseline first); write the comparison.
    With the series' timing `records` under train.plan fast, the answer's candidates alone."""
    base = next(r for r in runs if r.policy.baseline)
    others = [r for r in runs if not r.policy.baseline]
    fastest = (fastest_batches(records)
               if records is not None and base.train.plan == "fast" else None)
    chosen = plan([base, *others], steps, budget_s, probes or {}, fastest,
                  measured_steps(records))
    kept, left_out = chosen.kept, chosen.left_out
    result: dict[str, Any] = {
        **{k: v for k, v in encode(base.cell).items() if k != "policy"},
        "baseline": base.policy.name, "steps": steps, "left_out": left_out, "policies": {},
    }
    if base not in kept or len(kept) < 2:
        result["outcome"] = "not run: " + (
            "; ".join(f"{k}: {v}" for k, v in left_out.items())
            or "no policy to compare with the baseline"
        )
        write_json(out, result)
        return result
    if chosen.shortened:  # said only of a group that trains
        steps = result["steps"] = chosen.steps
        result["shortened"] = chosen.shortened
        print(f"parity: {chosen.shortened}", flush=True)
    seeds = [base.seed] * len(kept) + [base.seed + SPREAD_SEED]
    job = ParityJob(str(Path(out).with_name(f".{Path(out).name}.out")),
                    (*kept, base), tuple(seeds), prepared, steps)
    engine = Engine(python, run_environment(base))
    finished = engine.launch(job, ParityResult, memory.trainer_limit(base))
    if finished.death:
        result["outcome"] = f"{finished.death[0]}: {finished.death[1]}"
        write_json(out, result)
        return result
    done: ParityResult = finished.result
    baseline, *mixed, spread = done.runs
    result["outcome"] = Outcome.OK
    result["runs"] = [encode(r) for r in done.runs]
    result["fingerprint"] = done.fingerprint
    result["policies"] = {r.policy: verdict(r, baseline, spread) for r in mixed}
    result["policies"][base.policy.name] = {
        "end_loss": end_loss(baseline.losses), "spread_end_loss": end_loss(spread.losses),
        "verdict": "baseline",
    }
    for name, figures in result["policies"].items():
        print(f"parity, {name}: {figures['verdict']}", flush=True)
    write_json(out, result)
    return result
