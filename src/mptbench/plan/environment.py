"""What a run checks of its environments before its first job: each backend that the grid times
on a GPU of this machine sees a GPU there (jobs/environment.py gpu_problems starts them). A GPU
cell checks its own GPU too, but only after the download and the cache it waits for."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mptbench.core.cells import Cell
from mptbench.core.devices import Device
from mptbench.plan import layout


def src_first(src: str | Path) -> None:
    """This checkout's src/ first on PYTHONPATH, for every process the run starts (its jobs'
    scripts, and the engine they launch, which jobs/launcher.py also gives it: a variant's
    environment has no mptbench installed); once, however often the Snakefile is read."""
    found = os.environ.get("PYTHONPATH", "")
    if found.split(os.pathsep)[0] != str(src):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), found) if p)


def gpu_checks(cfg: dict[str, Any], cells: list[Cell]) -> list[tuple[str, str, str | None, dict]]:
    """(backend, GPU, the variant's environment manifest or None for the running one, the
    variant's variables) for each backend and environment a GPU cell runs in, at its first
    GPU: variants that share an environment share its check. None where the GPUs are other
    nodes' (device.check_present=false: the cells check there); a variant with an environment
    of its own is checked once that environment is made."""
    if not cfg["device"]["check_present"]:
        return []
    checks: dict[tuple[str, str | None], tuple[str, str, str | None, dict]] = {}
    for cell in cells:
        if not Device(cell.device).is_gpu:
            continue
        facts = cfg["variant"][cell.variant]
        manifest = None
        if facts.get("wheel") or facts.get("build"):
            manifest = layout.VARIANT_ENV.format(variant=cell.variant)
            if not Path(manifest).exists():
                continue
        checks.setdefault((cell.backend, manifest),
                          (cell.backend, cell.device, manifest, dict(facts.get("env") or {})))
    return list(checks.values())
