"""The smoke experiment's plan on a machine named `box`, for the tests of plan/: its config,
its cells, and the wildcards of its one comparison group's jobs (without the batch size)."""

from __future__ import annotations

from workflow_helpers import composed

from mptbench.plan import grid

GROUP = {
    "experiment": "smoke",
    "machine": "box",
    "model": "seed_convnet",
    "backend": "tensorflow",
    "variant": "pypi",
    "device": "cpu",
}


def smoke_plan(*overrides: str):
    """The smoke's config on `box` (with these overrides) and its cells there."""
    cfg = composed("smoke", "sweep.machine=box", *overrides)
    return cfg, grid(cfg, ["cpu"], ["box"])
