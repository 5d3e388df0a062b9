"""A cell's figures from its repeats: its step with a 95% interval over processes, the twin's,
FLOP rates, and each repeat's raw steps with their rounds and process (in ms: the report
pairs them with the baseline's, process by process and round by round, for the speedup).

The cell's step is its mean step, what a user's wall time follows (a few slow steps count):
per repeat the mean timed step, then their geometric mean, its interval a t interval over
processes on their logarithms (core/stats.py): what changes from one process to the next is
in it, and with one repeat there is none. The median step is kept beside it; FLOP rates and
images/s follow the mean. What else a repeat measured (its ArmResult's `measured`: the per_repeat
fields of core/record.py) is kept per repeat, and the cell's is its median over the ok repeats.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from mptbench.core import stats
from mptbench.core.contract import ArmResult, ModelInfo
from mptbench.core.outcomes import Outcome
from mptbench.core.record import PER_REPEAT, interval
from mptbench.core.stats import percentile
from mptbench.jobs import fullrun, host
from mptbench.jobs.profiles import breakdown, xplane_of


def _ms(seconds: list[float]) -> list[float]:
    return [round(1000 * s, 4) for s in seconds]


def step_figures(
    repeats: list[list[float]], prefix: str = "ms_per_step", widening: float = 0.0
) -> dict[str, Any]:
    """A cell's mean step over repeats of step seconds, with its interval (widened by
    `widening`, core/host.py), in ms."""
    estimate = replace(stats.step_estimate(repeats), widening=widening)
    return {prefix: 1000 * estimate.value} | interval(prefix, estimate, scale=1000)


def timed_figures(timed: list[ArmResult], batch_size: int, widening: float = 0.0) -> dict[str, Any]:
    """The cell's step (step_figures) with its median beside it, the spread of its timed
    samples, images/s at the mean step, and how much was timed: samples, and steps (a sample
    is one step, or on GPUs the mean of a block of block_steps steps)."""
    repeats = [r.step_s for r in timed]
    pooled = [s for steps in repeats for s in steps]
    figures = step_figures(repeats, widening=widening)
    median = stats.step_estimate(repeats, center=statistics.median)
    return figures | {
        "ms_per_step_median": 1000 * median.value,
        "ms_per_step_p10": 1000 * percentile(pooled, 10),
        "ms_per_step_p90": 1000 * percentile(pooled, 90),
        "images_per_sec": batch_size / (figures["ms_per_step"] / 1000),
        "timed_samples": len(pooled),
        "timed_steps": sum(len(r.step_s) * r.steps_per_sample for r in timed),
    }


def _outcome(repeats: list[ArmResult]) -> tuple[str, str | None]:
    for r in repeats:
        if r.outcome != Outcome.OK:
            where = f"repeat {r.repeat + 1}: " if len(repeats) > 1 else ""
            return r.outcome, f"{where}{r.reason}"
    return Outcome.OK, None


def _per_repeat(r: ArmResult, record: dict[str, Any], batch_size: int) -> dict[str, Any]:
    whole = fullrun.per_process(record, r, batch_size) if r.outcome == Outcome.OK else None
    return {
        "repeat": r.repeat + 1,
        "process": r.process,
        "sequence": r.sequence,
        "position": r.position,
        "outcome": r.outcome,
        "ms_per_step": 1000 * statistics.fmean(r.step_s) if r.step_s else None,
        "ms_per_step_median": 1000 * statistics.median(r.step_s) if r.step_s else None,
        "cpu_percent": r.cpu_percent,
        "stopped_by": r.stopped_by,
        "timed_wall_s": r.timed_wall_s,
        "step_ms": _ms(r.step_s),
        "rounds": r.rounds,
        "synthetic_step_ms": _ms(r.synthetic_step_s or []),
        "synthetic_rounds": r.synthetic_rounds or [],
        **{name: r.measured.get(name) for name in PER_REPEAT},
        "twin_note": r.twin_note,
        "warmup_ms": _ms(r.warmup_s),
        "host_samples_ms": _ms(r.host_s),
        "validation_first_ms": _ms([r.validation_first_s])[0] if r.validation_first_s else None,
        "validation_ms": _ms(r.validation_s),
        "epoch_starts": r.epoch_starts,
        "phases_s": r.process_phases_s,
        **{name: (whole or {}).get(key) for key, name in fullrun.FIGURES.items()},
    }


def _rates(record: dict) -> None:
    """The FLOP rates end to end and on the twin, from the step's FLOPs (model_info's)."""
    flops = record.get("flops_per_step")
    if not flops:
        return
    record["achieved_tflops"] = flops / (record["ms_per_step"] / 1000) / 1e12
    if record.get("synthetic_ms_per_step"):
        record["achieved_tflops_compute"] = flops / (record["synthetic_ms_per_step"] / 1000) / 1e12


def model_figures(info: ModelInfo | None, batch_size: int) -> dict[str, Any]:
    """What the record keeps of its model (model_info): size, builder, FLOPs per step."""
    if not info:
        return {}
    flops = {k: v * batch_size for k, v in info.training_flops_per_example.items()}
    figures = {
        "parameters": info.parameters,
        "conv_flops_per_step": flops.get("conv", 0),
        "matmul_flops_per_step": flops.get("matmul", 0),
        # What MFU counts: the convolutions and matmuls (the rest is counted apart).
        "flops_per_step": flops.get("conv", 0) + flops.get("matmul", 0),
        "other_flops_per_step": flops.get("other", 0),
    }
    keep = ("builder", "builder_file", "builder_sha256", "flops_counted_by")
    return figures | {k: getattr(info, k) for k in keep if getattr(info, k)}


def combine(
    record: dict[str, Any], repeats: list[ArmResult], batch_size: int,
    fastest_host_ms: float | None = None,
) -> None:
    """Fill the cell's record from its repeats' results; `fastest_host_ms`: the host's fastest
    on record, which the processes' own speed is set against (jobs/host.py)."""
    unknown = sorted({name for r in repeats for name in r.measured} - set(PER_REPEAT))
    if unknown:
        raise ValueError(
            f"the engine measured {', '.join(unknown)}: no per_repeat field of core/record.py"
        )
    record["outcome"], record["reason"] = _outcome(repeats)
    record["repeats"] = [_per_repeat(r, record, batch_size) for r in repeats]
    if repeats and repeats[0].fingerprint:
        record["fingerprint"] = repeats[0].fingerprint
    notes = [r.profile_note for r in repeats if r.profile_note]
    if notes:
        record["profile_note"] = notes[0]
    timed = [r for r in repeats if r.step_s]
    if not timed:
        return
    ok = [r for r in timed if r.outcome == Outcome.OK]
    record.update(host.figures(ok, fastest_host_ms))
    widening = record.get("host_widening") or 0.0
    record.update(timed_figures(timed, batch_size, widening))
    record["stopped_by"] = ", ".join(dict.fromkeys(r.stopped_by for r in timed))
    usage = [r.cpu_percent for r in repeats if r.cpu_percent is not None]
    record["trainer_cpu_percent"] = statistics.median(usage) if usage else None
    record["epochs"] = timed[0].epochs
    vals = [e["val_accuracy"] for e in record["epochs"] if "val_accuracy" in e]
    record["final_val_accuracy"] = vals[-1] if vals else None
    twins = [r for r in ok if r.synthetic_step_s]
    if twins:
        record.update(step_figures([r.synthetic_step_s for r in twins], "synthetic_ms_per_step",
                                   widening))
        record.update(_input_bound(twins, widening))
    record.update(repeat_medians(ok))
    stolen = [r.measured["cpu_stolen_pct"] for r in ok if "cpu_stolen_pct" in r.measured]
    if stolen:
        record["cpu_stolen_pct_most"] = max(stolen)
    record.update(_input_bound_most(ok))
    if ok:
        _rates(record)
        record.update(fullrun.figures(record, ok, batch_size, widening))
    if record.get("predicted_step_s"):
        record["prediction_error"] = record["predicted_step_s"] / (record["ms_per_step"] / 1000) - 1


def _input_bound(repeats: list[ArmResult], widening: float = 0.0) -> dict[str, Any]:
    """The mean step over its synthetic twin's, process by process (both ran in the same one),
    with a t interval over processes: an input-bound verdict needs the whole interval above 1."""
    logs = [
        math.log(statistics.fmean(r.step_s) / statistics.fmean(r.synthetic_step_s))
        for r in repeats
    ]
    estimate = replace(stats.of_logs(logs), widening=widening)
    return {"input_bound_ratio": estimate.value} | interval("input_bound_ratio", estimate)


def repeat_medians(repeats: list[ArmResult]) -> dict[str, float]:
    """Each per_repeat figure's median over the repeats that measured it (of those given)."""
    figures = {}
    for name in PER_REPEAT:
        values = [r.measured[name] for r in repeats if r.measured.get(name) is not None]
        if values:
            figures[name] = statistics.median(values)
    return figures


def _input_bound_most(repeats: list[ArmResult]) -> dict[str, Any]:
    """Where no twin ran but the input pipeline's own cost per batch was timed: the most the
    mean step can be over its compute because of it (the largest over those processes:
    core/stats.py input_bound_most), with the reason no twin ran."""
    skipped = [r for r in repeats if r.twin_note and _input_s(r) is not None]
    if not skipped or any(r.synthetic_step_s for r in repeats):
        return {}
    most = max(stats.input_bound_most(statistics.fmean(r.step_s), _input_s(r)) for r in skipped)
    return {"input_bound_ratio_most": most, "twin_note": skipped[0].twin_note}


def _input_s(r: ArmResult) -> float | None:
    """The input pipeline's cost per batch, in seconds: the larger of its wall and CPU time."""
    wall, cpu = r.measured.get("input_ms_per_batch"), r.measured.get("input_cpu_ms_per_batch")
    return None if wall is None or cpu is None else max(wall, cpu) / 1000


def _median_of(found: list[dict], key: str) -> float | None:
    values = [b[key] for b in found if b.get(key) is not None]
    return statistics.median(values) if values else None


def attach_breakdown(record: dict[str, Any], repeats: list[ArmResult]) -> None:
    """The op-class breakdown of every profiled repeat, and per class its median over them
    with their range (a class's spread shows how far one profile is to be trusted), beside
    the profiled step and the cell's timed step."""
    profiled = [r.profile for r in repeats if r.profile and r.profile.step_s]
    if not profiled or record.get("outcome") != Outcome.OK:
        return
    each = []
    for profile in profiled:
        xplane = xplane_of(profile.dir)
        if xplane is None:
            raise RuntimeError(f"the profiler wrote no *.xplane.pb under {profile.dir}")
        found = breakdown(xplane, profile.steps, 1000 * statistics.fmean(profile.step_s),
                          profile.scopes, profile.layers)
        each.append(found | {"xplane": str(xplane)})
    classes = {c: [b["classes_ms"][c] for b in each if c in b["classes_ms"]]
               for c in each[0]["classes_ms"]}
    record["breakdown"] = {
        "classes_ms": {c: statistics.median(v) for c, v in classes.items()},
        "classes_min_ms": {c: min(v) for c, v in classes.items()},
        "classes_max_ms": {c: max(v) for c, v in classes.items()},
        "profiled_ms_per_step": statistics.median(b["profiled_ms_per_step"] for b in each),
        "timed_ms_per_step": record.get("ms_per_step"),
        "closure": _median_of(each, "closure"),
        "function_ms_per_step": _median_of(each, "function_ms_per_step"),
        "threads": each[0].get("threads"),
        "concurrency": statistics.median(b["concurrency"] for b in each if b["concurrency"]),
        "profiles": len(each),
        "profile_steps": sum(b["profile_steps"] for b in each),
        "top_ops": each[0]["top_ops"],
        "layers": median_layers([b.get("layers") or [] for b in each]),
        "repeats": [{k: v for k, v in b.items() if k not in ("top_ops", "layers")} for b in each],
        "dir": str(Path(profiled[0].dir).parent),
    }


def median_layers(profiles: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each layer and class's row over the profiled repeats: its median ms a step (a profile
    where it did not run counts 0), min and max, and the ops a step and op types of the
    first profile that had it; largest first."""
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for found in profiles:
        for row in found:
            rows.setdefault((row["layer"], row["op_class"]), []).append(row)
    out = []
    for got in rows.values():
        ms = [r["ms"] for r in got] + [0.0] * (len(profiles) - len(got))
        out.append(got[0] | {"ms": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms)})
    return sorted(out, key=lambda r: -r["ms"])
