"""What a run that ended well prints: the report's paths, the commands that open Snakemake's
report and MLflow, and the aggregate's headline."""

import itertools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.core import frameworks
from mptbench.core.commands import program
from mptbench.plan.headline import config_arguments, mlflow_page, mlflow_ui, snakemake_report, text

OVERRIDES = 'overrides=["sweep.batch_sizes=[4]"]'
ARGV = ["snakemake", "--cores", "2", "--config", "experiment=smoke", OVERRIDES, "-n"]


def test_the_config_values_are_repeated_quoted_as_given():
    assert config_arguments(ARGV) == "experiment=smoke 'overrides=[\"sweep.batch_sizes=[4]\"]'"
    assert config_arguments(["snakemake", "-C", "a=1", "b=2"]) == "a=1 b=2"
    assert config_arguments(["snakemake", "--cores", "2"]) == ""


def test_a_sqlite_store_is_served_first_a_server_opened_directly():
    sqlite = {"uri": "sqlite:///results/mlflow.db", "ui": "http://127.0.0.1:5000"}
    assert mlflow_page(sqlite, "7") == (
        f"{program('mlflow')} ui --backend-store-uri sqlite:///results/mlflow.db, then open "
        "http://127.0.0.1:5000/#/experiments/7?workflowType=machine_learning"
    )
    server = {"uri": "https://mlflow.example", "ui": None}
    assert mlflow_page(server, "7") == "open https://mlflow.example"


@pytest.fixture
def finished(tmp_path, monkeypatch):
    """A working directory where the smoke experiment's aggregate wrote its headline."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/smoke/report").mkdir(parents=True)
    (tmp_path / "results/smoke/mlflow_experiment.json").write_text(
        json.dumps({"experiment_id": "7"})
    )
    return tmp_path / "results/smoke/report/headline.txt"


def test_nothing_is_printed_before_the_aggregate_wrote_the_headline(finished):
    assert text(composed("smoke", "sweep.machine=box"), ARGV) is None


def test_the_finished_run_names_its_report_and_how_to_open_it(finished):
    finished.write_text("cpu: mixed_float16 1.40x faster\n2 cells ran")
    lines = text(composed("smoke", "sweep.machine=box"), ARGV).split("\n")
    assert lines[0] == ""  # a blank line after Snakemake's last
    assert lines[1] == (
        "mptbench smoke: the report is results/smoke/report/index.html (tables: "
        "results/smoke/report/summary.csv, results/smoke/report/breakdown.csv)"
    )
    assert lines[2] == (
        f"  Snakemake's report: {program('snakemake')} --report results/smoke/report.zip "
        "--config experiment=smoke 'overrides=[\"sweep.batch_sizes=[4]\"]'"
    )
    assert lines[3].startswith(f"  MLflow: {program('mlflow')} ui --backend-store-uri sqlite:")
    # The headline's own lines, indented, and a blank line to end.
    assert lines[4:] == ["  cpu: mixed_float16 1.40x faster", "  2 cells ran", ""]


@pytest.mark.slow
def test_every_printed_command_runs_as_printed_from_the_project_root(monkeypatch):
    """README's quick start makes a .venv it never activates: each command a finished run
    prints, and each install line a message names, answers --help from the folder that holds
    the venv (the project root after the quick start) with no venv on PATH."""
    root = Path(sys.executable).parents[2]
    monkeypatch.chdir(root)
    cfg = composed("smoke", "sweep.machine=box")
    printed = [snakemake_report("smoke", ARGV), mlflow_ui(cfg["tracking"]["uri"]),
               frameworks.TORCH.install, frameworks.TENSORFLOW.gpu_install]
    assert printed[0].startswith(f"{Path(sys.executable).parent.relative_to(root)}/snakemake ")
    venv_bin = Path(sys.executable).parent
    path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != venv_bin]
    for command in printed:
        words = shlex.split(command)
        asked = [*itertools.takewhile(lambda word: not word.startswith("-"), words), "--help"]
        done = subprocess.run(asked, cwd=root, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PATH": os.pathsep.join(path)})
        assert done.returncode == 0, f"{command}: {done.stderr[-500:]}"
