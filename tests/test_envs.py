"""The environment specs in envs/ never drift from the pins in pyproject.toml."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines) -> dict[str, str]:
    pins = {}
    for line in lines:
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def _pyproject() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return _pins(project["dependencies"])


def test_every_dependency_is_pinned():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert len(_pins(deps)) == len(deps)


def test_conda_environment_matches_pyproject():
    env = yaml.safe_load((ROOT / "envs/mptbench.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert _pins(pip) == _pyproject()


def test_variant_requirements_match_pyproject():
    pins = _pins((ROOT / "envs/requirements-train.txt").read_text().splitlines())
    assert pins
    assert {k: _pyproject()[k] for k in pins} == pins


def test_the_variant_check_holds_tensorflow_to_pyproject_s_pin():
    """jobs/environment.py reads the pin from this installed mptbench, written nowhere else."""
    from mptbench.jobs.environment import PINNED_TENSORFLOW

    assert PINNED_TENSORFLOW == _pyproject()["tensorflow"]
