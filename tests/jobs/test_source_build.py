"""The TensorFlow source build: its Bazel command, its preflight checks, and a given wheel."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workflow_helpers import MACHINE, composed, copy_workflow, job_counts, snakemake

from mptbench.jobs.environment import VariantError
from mptbench.jobs.source_build import preflight

ROOT = Path(__file__).resolve().parents[2]
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
        assert f"results/benchmark/runs/{MACHINE}/{cell}.json" in out
    # 4 variants: a train job per series, its 5 batch sizes' groups of 3 policies in it.
    assert job_counts(out)["train"] == 4


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
    build = composed(None, "variant=[source_avx2_fma]")["variant"]["source_avx2_fma"][
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


@pytest.mark.slow
def test_a_hostile_repository_url_reaches_git_as_one_argument(tmp_path):
    """Config values are quoted in the one shell command: the clone it would run, run here
    against a `git` that records its arguments, gets the URL whole and runs nothing else."""
    url = "https://h.example/a b;$(touch pwned)`touch pwned2`"
    override = f"variant.source_avx2_fma.build.repository='{url}'"
    dry = _snakemake(
        "-n", "-p", "--config", f'overrides=["variant=[source_avx2_fma]","{override}"]'
    )
    assert dry.returncode == 0, dry.stderr[-2000:]
    command = next(
        line for line in (dry.stdout + dry.stderr).splitlines() if "git clone" in line
    ).removeprefix("Shell command: ")
    clone = command[command.index("git clone") : command.index(") > ")]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$GIT_ARGS"\n')
    (fake / "git").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    env["GIT_ARGS"] = str(tmp_path / "args")
    done = subprocess.run(["bash", "-c", clone], cwd=tmp_path, env=env, timeout=30)
    assert done.returncode == 0
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:5] == ["clone", "--depth", "1", "--branch", "v2.21.0"]
    assert args[5] == url and len(args) == 7
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    assert not (ROOT / "pwned").exists()
