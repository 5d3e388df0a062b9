"""A variant's environment: this one for the PyPI variants, a venv of its own for a wheel."""

import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.core.files import sha256_of
from mptbench.jobs.environment import make_environment

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_pypi_variants_reuse_this_environment_and_record_its_build():
    variant = composed(None, "variant=[pypi_onednn]")["variant"]["pypi_onednn"]
    manifest = make_environment(
        "pypi_onednn", variant, None, Path("unused"), Path("unused"), log=lambda _: None
    )
    assert manifest["python"] == sys.executable
    assert manifest["tensorflow"] == "2.21.0"
    assert manifest["env"] == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert manifest["onednn"] == "on"
    assert manifest["verified"] is True


@pytest.mark.slow
def test_a_prebuilt_wheel_gets_its_own_verified_environment(tmp_path):
    """The PyPI wheel posing as an AVX2/FMA build: installed for real, then flagged."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "-d", str(wheels), "tensorflow==2.21.0"],
        check=True, timeout=900,
    )
    wheel = next(wheels.glob("tensorflow-2.21.0-*.whl"))
    variant = composed(None, "variant=[source_avx2_fma]")["variant"][
        "source_avx2_fma"
    ]
    requirements = ROOT / "envs/requirements-train.txt"
    manifest = make_environment(
        "source_avx2_fma", variant, str(wheel), tmp_path / "envs", requirements, log=lambda _: None
    )
    assert manifest["python"] == str(tmp_path / "envs/source_avx2_fma/bin/python")
    assert manifest["wheel"] == wheel.name
    assert manifest["wheel_sha256"] == sha256_of(wheel)
    assert manifest["tensorflow"] == "2.21.0"
    if {"AVX2", "FMA"} & set(manifest["tf_unused_cpu_instructions"]):
        assert manifest["verified"] is False
        assert manifest["warning"].startswith("not the build you asked for")
