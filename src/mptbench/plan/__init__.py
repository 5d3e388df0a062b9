"""The plan: what runs when the Snakefile is parsed. Hydra composition, its schema and checks,
the grid of cells with what each cell's run is given, where every file lives, and what each
rule's jobs wait for, are given and ask the scheduler for."""

from mptbench.plan.compose import (
    check_workflow_config,
    compose_config,
    options,
    parse_overrides,
    workflow_overrides,
)
from mptbench.plan.errors import ConfigError
from mptbench.plan.grid import (
    AXES,
    Cell,
    expand_devices,
    grid,
    left_out,
    machines,
    model_config,
    pairs,
    run_config,
)

__all__ = [
    "AXES",
    "Cell",
    "ConfigError",
    "check_workflow_config",
    "compose_config",
    "expand_devices",
    "grid",
    "left_out",
    "machines",
    "model_config",
    "pairs",
    "options",
    "parse_overrides",
    "run_config",
    "workflow_overrides",
]
