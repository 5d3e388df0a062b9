"""The smoke experiment's plan on a machine named `box`, for the tests of plan/: its config,
its cells, and the wildcards of its one comparison group's jobs (without the batch size)."""

from __future__ import annotations

from pathlib import Path

from mptbench.plan import compose_config, grid

CONF = Path(__file__).resolve().parents[1] / "conf"
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
    cfg = compose_config(CONF, "smoke", ["sweep.machine=box", *overrides])
    return cfg, grid(cfg, ["cpu"], ["box"])
