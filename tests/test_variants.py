"""TensorFlow variants: the source build's command and checks, and a variant's own environment."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workflow_helpers import job_counts, snakemake

from mptbench.config import compose_config
from mptbench.variants import VariantError, make_environment, preflight, sha256_of

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
FOUR = 'overrides=["variant=[pypi,pypi_onednn,pypi_xla,source_avx2_fma]"]'


def _snakemake(*args):
    return snakemake(ROOT, *args, timeout=300)


@pytest.mark.slow
def test_dry_run_prints_the_bazel_build_and_the_grid_has_every_variant():
    dry = _snakemake("-n", "-p", "--config", FOUR)
    assert dry.returncode == 0, dry.stderr[-2000:]
    out = dry.stdout + dry.stderr
    bazel = next(
        line for line in out.splitlines() if "bazel" in line.lower() and "build //" in line
    )
    assert "//tensorflow/tools/pip_package:wheel" in bazel
    assert "--copt=-mavx2 --copt=-mfma" in bazel
    assert "USE_BAZEL_VERSION=7.4.1" in bazel
    assert (
        "--repo_env=USE_PYWRAP_RULES=1" in bazel and "--repo_env=WHEEL_NAME=tensorflow_cpu" in bazel
    )
    assert (
        f"--repo_env=HERMETIC_PYTHON_VERSION={sys.version_info.major}.{sys.version_info.minor}"
        in bazel
    )
    assert "git clone --depth 1 --branch v2.21.0" in out
    for variant in ("pypi", "pypi_onednn", "pypi_xla", "source_avx2_fma"):
        assert f"results/benchmark/runs/{variant}/cpu/float32/bs32.json" in out
    assert job_counts(out)["train"] == 60


@pytest.mark.slow
def test_a_given_wheel_skips_the_build():
    dry = _snakemake(
        "-n",
        "--config",
        'overrides=["variant=[source_avx2_fma]","variant.source_avx2_fma.wheel=/x.whl"]',
    )
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "build_tensorflow" not in dry.stdout + dry.stderr


def test_missing_tools_and_network_fail_at_once_with_one_message(tmp_path):
    build = compose_config(CONF, None, ["variant=[source_avx2_fma]"])["variant"]["source_avx2_fma"][
        "build"
    ]
    build = dict(build, repository="http://127.0.0.1:9/tensorflow.git")  # nothing listens there
    empty = tmp_path / "bin"
    empty.mkdir()
    started = time.monotonic()
    old_path = os.environ["PATH"]
    os.environ["PATH"] = str(empty)
    try:
        with pytest.raises(VariantError) as info:
            preflight(build, tmp_path / "tools", "source_avx2_fma", log=lambda _: None)
    finally:
        os.environ["PATH"] = old_path
    message = str(info.value)
    assert time.monotonic() - started < 30
    assert "\n" not in message
    assert "git (not on PATH)" in message
    assert "bazelisk (not on PATH, and no npm to install @bazel/bazelisk)" in message
    assert "network access to http://127.0.0.1:9/tensorflow.git" in message
    assert "variant.source_avx2_fma.wheel=/path/to/tensorflow_cpu-2.21.0-" in message


def test_build_rule_script_reports_missing_bazel_as_one_line(tmp_path):
    variant = compose_config(CONF, None, ["variant=[source_avx2_fma]"])["variant"][
        "source_avx2_fma"
    ]
    variant["build"]["repository"] = "http://127.0.0.1:9/tensorflow.git"
    env = {**os.environ, "PATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "workflow/scripts/variants.py"), "preflight",
         "--name", "source_avx2_fma", "--variant", json.dumps(variant),
         "--tools", str(tmp_path / "tools")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""  # nothing a shell would take for a bazelisk path
    assert done.stderr.startswith("error: cannot build TensorFlow from source here: missing")


def test_pypi_variants_reuse_this_environment_and_record_its_build():
    variant = compose_config(CONF, None, ["variant=[pypi_onednn]"])["variant"]["pypi_onednn"]
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
    )  # fmt: skip
    wheel = next(wheels.glob("tensorflow-2.21.0-*.whl"))
    variant = compose_config(CONF, None, ["variant=[source_avx2_fma]"])["variant"][
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
