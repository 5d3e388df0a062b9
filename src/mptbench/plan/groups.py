"""Which cells a timing job stands for, read from its wildcards (a train job's series of
comparison groups, a parity job's comparison group, a probe's cell, a fits search's first try),
and the Run each is given as the job contract encodes it: a rule's param, so a change to a Run
reruns its job."""

from __future__ import annotations

from typing import Any

from mptbench.core.cells import COMPARISON_AXES, GROUP_AXES, PROBE_AXES, Cell
from mptbench.core.contract import encode
from mptbench.plan import layout
from mptbench.plan.errors import ConfigError
from mptbench.plan.grid import run_config
from mptbench.plan.params import Wildcards


def comparison(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> list[Cell]:
    """The cells of a comparison group: one per policy, the group's other axes the same."""
    axes = {k: wildcards[k] for k in COMPARISON_AXES}
    group = [
        Cell(**{**axes, "batch_size": int(axes["batch_size"]), "policy": policy})
        for policy in cfg["policy"]
    ]
    if not set(group) <= set(cells):
        raise ConfigError(
            f"{layout.COMPARISON.format(**axes)} is not a comparison of experiment {cfg['name']}"
        )
    return group


def group_runs(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> list[Any]:
    """The Runs of a comparison group's cells, in policy order (a parity job's)."""
    return [encode(run_config(cfg, cell)) for cell in comparison(cfg, cells, wildcards)]


def series(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> list[list[Cell]]:
    """A train job's comparison groups: one per batch size of its model, backend, variant and
    device, in batch order, each its cells in policy order."""
    axes = {k: wildcards[k] for k in GROUP_AXES}
    return [
        comparison(cfg, cells, {**axes, "batch_size": batch})
        for batch in cfg["sweep"]["batch_sizes"]
    ]


def train_runs(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> list[Any]:
    """The Runs of a train job's series, group by group (series)."""
    return [[encode(run_config(cfg, c)) for c in group] for group in series(cfg, cells, wildcards)]


def probe_run(cfg: dict[str, Any], wildcards: Wildcards) -> Any:
    """The Run of a cell's probe: its own cell at the smaller probe batch size."""
    batch_size = cfg["train"]["probe_batch_sizes"][0]
    cell = Cell(**{k: wildcards[k] for k in PROBE_AXES}, batch_size=batch_size)
    return encode(run_config(cfg, cell))


def fit_run(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> Any:
    """The Run the fits search starts from: its cell at the grid's smallest batch size."""
    batch_size = min(cfg["sweep"]["batch_sizes"])
    cell = Cell(**{k: wildcards[k] for k in PROBE_AXES}, batch_size=batch_size)
    if cell not in cells:
        path = layout.OUTPUTS["fits"].format(**wildcards)
        raise ConfigError(f"{path}: not a cell of {cfg['name']}")
    return encode(run_config(cfg, cell))
