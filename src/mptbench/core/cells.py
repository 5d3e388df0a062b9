"""A grid cell: one timing run. Its fields are the grid's axes (AXES: the order every path,
table and loop uses, the machine first)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from mptbench.core.frameworks import NAMES

# The Keras backends mptbench knows, declared in core/frameworks.py (conf/backend/ has one
# yaml each; the schema, the rules' wildcards and the engine's backends follow this tuple).
BACKENDS = NAMES


@dataclass(frozen=True)
class Cell:
    # The hardware it runs on (core/hardware.py): this machine's id, or a sweep.targets name.
    machine: str
    model: str
    backend: str
    variant: str
    device: str
    policy: str
    batch_size: int

    def wildcards(self, experiment: str) -> dict[str, Any]:
        return {"experiment": experiment, **asdict(self)}

    @property
    def label(self) -> str:
        *axes, batch_size = (getattr(self, a) for a in AXES)
        return "/".join((*axes, f"bs{batch_size}"))

    @property
    def group(self) -> tuple[str, ...]:
        return tuple(getattr(self, a) for a in GROUP_AXES)


AXES = tuple(f.name for f in fields(Cell))
# A report group: the cells that differ only in policy and batch size (one table, one plot).
GROUP_AXES = AXES[:5]
# What a probe is per: every axis but the batch size (it times its own two batch sizes).
PROBE_AXES = AXES[:6]
# A comparison group: the cells that differ only in policy, timed together in one job, taking
# turns in the same processes (engine/rounds.py), so a speedup is measured paired.
COMPARISON_AXES = tuple(a for a in AXES if a != "policy")


def key_of(values: dict[str, Any], axes: tuple[str, ...] = GROUP_AXES) -> tuple:
    """The values of `axes` in a record (or a fits or parity output); one written before
    machines were an axis has the machine "local"."""
    return tuple(values.get(a) or ("local" if a == "machine" else None) for a in axes)
