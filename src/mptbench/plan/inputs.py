"""The files a rule's jobs wait for besides their fixed ones: named from a job's wildcards (a
group's probes and fits searches, a cell's probe, its model's description, a build's wheels),
or from the grid (the aggregate's run records, fits searches and parity comparisons)."""

from __future__ import annotations

from typing import Any

from mptbench.core.cells import PROBE_AXES, Cell
from mptbench.core.contract import REPORTED
from mptbench.data.download import is_remote
from mptbench.plan import layout, params
from mptbench.plan.params import Wildcards

# A probe's or fits search's axes, but for the policy: what a comparison group's cells share.
_PER_POLICY = tuple(a for a in ("experiment", *PROBE_AXES) if a != "policy")


def model_info(cfg: dict[str, Any], wildcards: Wildcards) -> str:
    """The description of a cell's model on this experiment's data."""
    return params.description(cfg, wildcards["model"])


def model_info_data(cfg: dict[str, Any]) -> list[str]:
    """What a model's description reads besides its config: nothing where the config gives the
    data's shape (layout.model_data), else the prepared cache, whose classes only it knows."""
    dataset = cfg["dataset"]
    return [] if isinstance(layout.model_data(dataset), dict) else [layout.prepared(dataset)]


def _per_policy(pattern: str, cfg: dict[str, Any], wildcards: Wildcards) -> list[str]:
    axes = {k: wildcards[k] for k in _PER_POLICY}
    return [pattern.format(**axes, policy=policy) for policy in cfg["policy"]]


def group_probes(cfg: dict[str, Any], wildcards: Wildcards) -> list[str]:
    """The probes a group's cells predict their step time from, one per policy, when a
    step-time limit is set (train.max_step_seconds)."""
    if not cfg["train"]["max_step_seconds"]:
        return []
    return _per_policy(layout.OUTPUTS["probe"], cfg, wildcards)


def group_fits(cfg: dict[str, Any], wildcards: Wildcards) -> list[str]:
    """The searches whose tries give a group's cells their peak memory (none when
    sweep.fit_search is off)."""
    if not REPORTED["fits"].wanted(cfg):
        return []
    return _per_policy(layout.OUTPUTS["fits"], cfg, wildcards)


def cell_probe(cfg: dict[str, Any], wildcards: Wildcards) -> list[str]:
    """The probe a fits search predicts its steps from (none without a step-time limit)."""
    if not cfg["train"]["max_step_seconds"]:
        return []
    axes = {k: wildcards[k] for k in ("experiment", *PROBE_AXES)}
    return [layout.OUTPUTS["probe"].format(**axes)]


def built_wheels(cfg: dict[str, Any], wildcards: Wildcards) -> str | list[str]:
    """The build rule's wheel folder, for a variant that builds its wheel and was given none."""
    variant = params.variant(cfg, wildcards)
    if variant["build"] and not variant["wheel"]:
        return layout.WHEELS.format(variant=wildcards["variant"])
    return []


def local_inputs(*sources: str | None) -> list[str]:
    """Local paths among a dataset's sources: inputs, so a rule can produce them first."""
    return [
        str(s) for s in sources if s and not is_remote(str(s)) and not str(s).startswith("file:")
    ]


def records(cfg: dict[str, Any], cells: list[Cell]) -> list[str]:
    """Every cell's run record, in grid order: what the report is made of."""
    return [layout.RUN_RECORD.format(**cell.wildcards(cfg["name"])) for cell in cells]


def reported(cfg: dict[str, Any], cells: list[Cell]) -> dict[str, list[str]]:
    """What the report reads beside the run records, by job kind (core/contract/kinds.py
    REPORTED): each kind's outputs for the grid's cells, none where the plan does not ask for
    them (the fits search off, no parity steps or nothing to compare)."""
    return {
        name: sorted({layout.OUTPUTS[name].format(**c.wildcards(cfg["name"])) for c in cells})
        if kind.wanted(cfg) else []
        for name, kind in REPORTED.items()
    }
