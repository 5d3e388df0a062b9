"""Each Keras backend's facts, declared once in core/frameworks.py: what the rest follows."""

import tomllib
from pathlib import Path

import yaml

from mptbench.core import frameworks
from mptbench.core.cells import BACKENDS
from mptbench.core.commands import program
from mptbench.core.record import FIELDS
from mptbench.engine import backends

ROOT = Path(__file__).resolve().parents[2]


def test_every_framework_s_yaml_is_read_and_the_extras_it_names_exist():
    """(The names of backends, yamls, engine backends and kernels agree: test_architecture.)"""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert BACKENDS == frameworks.NAMES
    for found in frameworks.FRAMEWORKS:
        declared = yaml.safe_load((ROOT / "conf/backend" / f"{found.name}.yaml").read_text())
        assert set(declared[found.name]) == {"description"}, "a yaml key nothing reads"
        assert backends.backend(found.name).facts is found
        # The lines a user is told to run name extras that exist.
        for extra in {found.extra, found.gpu_extra} - {None}:
            assert extra in extras, f"{found.name}: pyproject has no extra {extra}"
        assert found.gpu_install == f"{program('pip')} install -e '.[{found.gpu_extra}]'"
    # PyPI's torch is a CUDA build: a CPU is told PyTorch's CPU build of the extra's pin, as
    # README's test command installs it (tests/test_envs.py).
    assert frameworks.TORCH.install == (f"{program('pip')} install torch==2.13.0+cpu "
                                        "--extra-index-url https://download.pytorch.org/whl/cpu")
    assert frameworks.TORCH.gpu_install == f"{program('pip')} install -e '.[torch]'"
    assert frameworks.TENSORFLOW.install == f"{program('pip')} install -e ."


def test_every_framework_s_versions_are_record_fields_its_backend_fills():
    names = {f.name for f in FIELDS}
    for found in frameworks.FRAMEWORKS:
        assert set(found.versions) <= names
    assert frameworks.VERSION_FIELDS == ("tensorflow", "jax", "jaxlib", "torch")
