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


# What pulls NVIDIA's CUDA libraries into an environment: PyPI's torch for Linux (a CUDA build),
# TensorFlow's and JAX's CUDA extras, or one of those libraries named outright.
CUDA = re.compile(r"^(torch\b(?!==[^;]*\+cpu)|nvidia-|[\w-]+\[[^\]]*\b(and-cuda|cuda\d*)\b)")


def _extra_requirements(extras: dict[str, list[str]], name: str) -> list[str]:
    """An extra's requirements, through the extras of this project it names (mptbench[jax])."""
    found = []
    for requirement in extras[name]:
        inner = re.fullmatch(r"mptbench\[([\w,-]+)\]", requirement)
        if inner:
            for other in inner.group(1).split(","):
                found += _extra_requirements(extras, other)
        else:
            found.append(requirement)
    return found


def _cuda_in_the_test_environment(project: dict, readme: str) -> list[str]:
    """What of the test command's installs would bring CUDA from a plain PyPI index: the
    dependencies, the test extra's, and what README's test command installs apart."""
    command = re.search(r"<!-- test-command -->\s*```sh\n(.+?)\n```", readme, re.S).group(1)
    installs = [part.split() for part in command.split(" && ")]
    apart = [word for words in installs if words[0].endswith("pip") and words[1] == "install"
             for word in words[2:] if not word.startswith(("-", "'.", "http"))]
    test = _extra_requirements(project["optional-dependencies"], "test")
    return [r for r in [*project["dependencies"], *test, *apart] if CUDA.match(r)]


def test_the_test_command_installs_no_cuda_library_whatever_the_index():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = (ROOT / "README.md").read_text()
    assert _cuda_in_the_test_environment(project, readme) == []
    # The torch tests still run in CI: the command installs PyTorch's CPU wheel of the torch
    # extra's own pin, from PyTorch's CPU index (no other index has a +cpu build).
    (pin,) = project["optional-dependencies"]["torch"]
    assert f"pip install {pin}+cpu --extra-index-url https://download.pytorch.org/whl/cpu" in readme


def test_the_cuda_check_catches_torch_or_a_cuda_extra_in_the_test_environment():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = (ROOT / "README.md").read_text()
    extras = project["optional-dependencies"]
    for planted in ("mptbench[torch]", "tensorflow[and-cuda]==2.21.0", "jax[cuda12]==0.10.2",
                    "nvidia-cudnn-cu12==9.28.0.42"):
        with_it = {**project, "optional-dependencies": {**extras, "test": [*extras["test"],
                                                                          planted]}}
        assert _cuda_in_the_test_environment(with_it, readme), planted
    plain = readme.replace("torch==2.13.0+cpu", "torch==2.13.0")
    assert _cuda_in_the_test_environment(project, plain) == ["torch==2.13.0"]
