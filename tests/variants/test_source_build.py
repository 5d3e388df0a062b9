"""The TensorFlow source build: its Bazel command, its preflight checks, and a given wheel."""

import os
import sys
import time
from pathlib import Path

import pytest
from workflow_helpers import copy_workflow, job_counts, snakemake

from mptbench.config import compose_config
from mptbench.variants.environment import VariantError
from mptbench.variants.source_build import preflight

ROOT = Path(__file__).resolve().parents[2]
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
        cell = f"seed_convnet/tensorflow/{variant}/cpu/float32/bs32"
        assert f"results/benchmark/runs/{cell}.json" in out
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


@pytest.mark.slow
def test_build_preflight_rule_fails_with_one_line_and_writes_nothing(tmp_path):
    checkout = copy_workflow(tmp_path)
    overrides = (
        'overrides=["variant=[source_avx2_fma]",'
        '"variant.source_avx2_fma.build.repository=http://127.0.0.1:9/tensorflow.git"]'
    )
    target = "resources/build/source_avx2_fma/bazelisk.path"
    done = snakemake(checkout, target, "--cores", "1", "--config", overrides, timeout=120)
    assert done.returncode != 0
    log = (checkout / "resources/logs/build_preflight/source_avx2_fma.log").read_text()
    last = log.strip().splitlines()[-1]
    assert last.startswith("error: cannot build TensorFlow from source here: missing")
    assert "network access to http://127.0.0.1:9/tensorflow.git" in last
    assert not (checkout / target).exists()
