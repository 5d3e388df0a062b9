"""What fits: the largest batch one policy's cells train at on their device, within its memory
or a limit given for it (device.<kind>.fits_search_mb), and each batch size's peak memory.

Every try is a short real training run in a fresh process (engine/fits.py). The search: every
batch size of the grid, smallest first (their peaks are the cells' peak memory); above the
largest that fit, doubling up to sweep.max_batch; then bisection between the largest that fit
and the smallest that did not until they are within 10% of each other. When even the grid's
smallest does not fit: halving down to batch 1 first. Only an out-of-memory outcome means
"does not fit", each with its evidence (the framework's error, or the kernel's OOM kill of the
trainer's own cgroup); any other failure ends the search and says so. A try the probe predicts
over train.max_step_seconds is not run: the search stops below it and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mptbench.core.contract import FitJob, FitResult, ProbeResult, Run, encode
from mptbench.core.devices import Device
from mptbench.core.files import write_json
from mptbench.core.outcomes import Outcome
from mptbench.jobs import memory
from mptbench.jobs.budget import assess
from mptbench.jobs.launcher import Engine, run_environment

WITHIN = 0.10  # bisection stops when the smallest that failed is within 10% of the largest fit


@dataclass
class Search:
    """A search's tries in the order they ran, and where it ended."""

    tries: list[FitResult] = field(default_factory=list)
    largest_fit: int | None = None
    smallest_failed: int | None = None
    stopped_by: str = ""


def search(
    attempt: Callable[[int], FitResult],
    batch_sizes: list[int],
    cap: int,
    skip: Callable[[int], str | None] = lambda _b: None,
) -> Search:
    """The largest batch that fits (see the module's docstring); `attempt` runs one try,
    `skip` says why a batch is not to be tried (None: try it)."""
    found = Search()

    def run(batch: int) -> bool | None:
        """True: it fit; False: out of memory; None: the search must stop."""
        why = skip(batch)
        if why:
            found.stopped_by = f"batch {batch} not tried: {why}"
            return None
        result = attempt(batch)
        found.tries.append(result)
        if result.outcome == Outcome.OK:
            found.largest_fit = max(found.largest_fit or 0, batch)
            return True
        if result.outcome == Outcome.OOM:
            found.smallest_failed = min(found.smallest_failed or batch, batch)
            return False
        found.stopped_by = f"batch {batch} ended {result.outcome}: {result.reason}"
        return None

    grid = sorted(b for b in set(batch_sizes) if b <= cap)
    if not grid:
        found.stopped_by = f"no batch size of the grid is at most sweep.max_batch={cap}"
        return found
    for batch in grid:
        fit = run(batch)
        if not fit:
            break
    else:
        while found.largest_fit and found.largest_fit < cap:  # doubling, up to the cap
            fit = run(min(2 * found.largest_fit, cap))
            if not fit:
                break
        if found.largest_fit == cap and not found.stopped_by:
            found.stopped_by = f"every batch up to the cap fit (sweep.max_batch={cap})"
            return found
    if found.stopped_by:
        return found
    while found.largest_fit is None and found.smallest_failed > 1:  # halving, down to 1
        if run(found.smallest_failed // 2) is None:
            return found
    if found.largest_fit is None:
        found.stopped_by = "not even batch 1 fit"
        return found
    while found.smallest_failed > found.largest_fit * (1 + WITHIN) + 1:  # bisection
        if run((found.largest_fit + found.smallest_failed) // 2) is None:
            return found
    found.stopped_by = (
        f"batch {found.largest_fit} fit and {found.smallest_failed} did not "
        f"(within {100 * WITHIN:.0f}%)"
    )
    return found


def limit_setting(device: Device) -> str:
    """The setting the tries' memory limit comes from."""
    return f"device.{device.kind}.fits_search_mb"


def memory_limit(run: Run, limit_mb: int | None) -> dict[str, Any]:
    """The limit the tries run under, and where it comes from."""
    setting = limit_setting(Device(run.cell.device))
    if limit_mb:
        return {"fits_search_mb": limit_mb, "memory_limit": f"{setting}={limit_mb}"}
    return {"fits_search_mb": None, "memory_limit": f"the device's own memory, {setting} null"}


def what_fits(
    python: str,
    run: Run,
    prepared: str,
    out: str,
    batch_sizes: list[int],
    cap: int,
    steps: int,
    limit_mb: int | None = None,
    probe: ProbeResult | None = None,
) -> dict[str, Any]:
    """Search the largest batch of `run`'s policy that fits; write what was found to `out`."""
    device = Device(run.cell.device)
    engine = Engine(python, run_environment(run))
    scratch = Path(out).with_name(f".{Path(out).name}.try")
    # On a GPU the framework holds the limit; on a CPU the supervisor does, naming it.
    cpu_limit = (None if device.is_gpu or not limit_mb
                 else memory.Limit(limit_mb, limit_setting(device)))

    def attempt(batch: int) -> FitResult:
        tried = replace(run, cell=replace(run.cell, batch_size=batch))
        job = FitJob(str(scratch), tried, prepared, steps, limit_mb)
        finished = engine.launch(job, FitResult, cpu_limit)
        if finished.death:
            outcome, reason = finished.death
            print(f"batch {batch}: {outcome}: {reason}", flush=True)
            return FitResult(batch, outcome, reason)
        return finished.result

    def skip(batch: int) -> str | None:
        verdict = assess(replace(run, cell=replace(run.cell, batch_size=batch)), probe)
        return verdict.get("reason")

    found = search(attempt, batch_sizes, cap, skip)
    print(f"{run.policy.name}: {found.stopped_by}", flush=True)
    result = {
        **{k: v for k, v in encode(run.cell).items() if k != "batch_size"},
        "compute_dtype": run.policy.compute_dtype,
        "baseline": run.policy.baseline,
        **memory_limit(run, limit_mb),
        "max_batch": cap,
        "steps": steps,
        "largest_fit": found.largest_fit,
        "smallest_failed": found.smallest_failed,
        "stopped_by": found.stopped_by,
        "fingerprint": next((t.fingerprint for t in found.tries if t.fingerprint), {}),
        "tries": [{k: v for k, v in encode(t).items() if k != "fingerprint"} for t in found.tries],
    }
    write_json(out, result)
    return result


def cell_memory(fits: dict[str, Any] | None, batch_size: int) -> dict[str, Any]:
    """What a cell's record keeps of its policy's search: its own batch size's peak memory
    (and where the figure comes from), the largest batch that fit, the limit they ran under."""
    if not fits:
        return {}
    tried = next((t for t in fits["tries"] if t["batch_size"] == batch_size), None)
    figures = {
        "largest_fit_batch": fits["largest_fit"],
        "fits_search_mb": fits["fits_search_mb"],
        "fits_at_batch": None if tried is None else tried["outcome"] == Outcome.OK,
    }
    if tried and tried["outcome"] == Outcome.OK:
        figures |= {"peak_memory_mb": tried["peak_mb"], "peak_memory_source": tried["peak_source"]}
    return figures
