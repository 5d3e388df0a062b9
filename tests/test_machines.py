"""Several machines, one report: a second machine's cells (its identity faked with the
test-only MPTBENCH_TEST_CPU_NAME) beside the smoke run's, merged from the smoke's results
folder without touching it; and a train job that lands on other hardware than its probe's
is stopped with one line."""

import os

import pandas as pd
import pytest
from workflow_helpers import MACHINE, SMOKE_CELLS, one_cell_config, snakemake, warm_copy

from mptbench.core.hardware import TEST_CPU_NAME

pytestmark = [pytest.mark.slow, pytest.mark.workflow]
XEON = "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"
OTHER = f"intel-xeon-gold-6248-{os.cpu_count()}c"


def test_a_second_machine_joins_the_report_and_other_hardware_is_caught(
    smoke_run, warm, tmp_path_factory
):
    theirs = smoke_run[0] / "results" / "smoke"
    before = {p: p.read_bytes() for p in (theirs / "runs").rglob("*.json")}
    checkout = warm_copy(warm, tmp_path_factory.mktemp("machines"))
    # One cell, with its probe (a train job checks its hardware against the probe's).
    config = one_cell_config("smoke", "train.max_step_seconds=20", f"report.include=['{theirs}']")
    done = snakemake(checkout, "--cores", "2", "--config", *config, timeout=600,
                     env={**os.environ, TEST_CPU_NAME: XEON})
    assert done.returncode == 0, done.stderr[-4000:]
    ours = checkout / "results" / "smoke"
    assert [p.relative_to(ours) for p in (ours / "runs").rglob("*.json")] == [
        ours.joinpath("runs", OTHER, "seed_convnet/tensorflow/pypi/cpu/float32/bs8.json")
        .relative_to(ours)
    ]
    summary = pd.read_csv(ours / "report" / "summary.csv")
    assert summary.groupby("machine").size().to_dict() == {MACHINE: SMOKE_CELLS, OTHER: 1}
    assert set(summary[summary["machine"] == OTHER]["hardware_id"]) == {OTHER}
    html = (ours / "report" / "index.html").read_text()
    for machine in (MACHINE, OTHER):
        assert f'<h2 class="machine" id="machine-{machine}">Machine {machine}</h2>' in html
    side = html.split('<h2 id="machines">Machines compared</h2>', 1)[1].split("<h2", 1)[0]
    assert f"{MACHINE} · cpu" in side and f"{OTHER} · cpu" in side
    assert "published (2020) · Tesla V100" in side
    # The other machine's folder was read, not written.
    assert before == {p: p.read_bytes() for p in (theirs / "runs").rglob("*.json")}

    # The same cells (sweep.machine names them) timed again on hardware their probe did not
    # run on: the train job stops before timing anything, naming both.
    config = one_cell_config("smoke", "train.max_step_seconds=20", f"sweep.machine={OTHER}")
    again = snakemake(checkout, "--cores", "2", "--forcerun", "train", "--config", *config,
                      timeout=300, env={**os.environ, TEST_CPU_NAME: "AMD EPYC 7B12"})
    assert again.returncode != 0
    log = ours / "logs" / "train" / OTHER / "seed_convnet/tensorflow/pypi/cpu.log"
    last = log.read_text().strip().splitlines()[-1]
    assert last.startswith(f"error: this job landed on amd-epyc-7b12-{os.cpu_count()}c (host ")
    assert f"but the float32 probe ran on {OTHER} (host " in last
