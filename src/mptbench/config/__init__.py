"""The configuration: Hydra composition, its schema and checks, the grid and the paths."""

from mptbench.config.compose import (
    check_workflow_config,
    compose_config,
    options,
    parse_overrides,
)
from mptbench.config.errors import ConfigError
from mptbench.config.grid import AXES, Cell, expand_devices, grid, left_out, pairs, run_config

__all__ = [
    "AXES",
    "Cell",
    "ConfigError",
    "check_workflow_config",
    "compose_config",
    "expand_devices",
    "grid",
    "left_out",
    "pairs",
    "options",
    "parse_overrides",
    "run_config",
]
