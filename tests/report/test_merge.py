"""Several machines in one report: results folders side by side (and MLflow stores), each
cell once, a section per machine and the machines side by side with the published ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from records import record as run_record
from report.test_aggregate import CELLS, EXPERIMENT, make_record

from mptbench.report.aggregate import write_report
from mptbench.report.merge import load, merged
from mptbench.report.records import ReportError

CPU_CELLS = [c for c in CELLS if c[0] == "cpu"]


def _results(root: Path, machine: str, host: str, started: str, version: str = "0.2.0") -> Path:
    """A machine's results/<experiment> folder, as copied from it."""
    folder = root / "results" / EXPERIMENT
    for cell in CPU_CELLS:
        device, policy, batch_size = cell[:3]
        record = make_record(
            *cell, machine=machine, started_at=started, mptbench=version,
            hardware={"id": machine, "name": machine, "host": host}, fingerprint={"host": host},
        )
        path = folder / "runs" / machine / "seed_convnet/tensorflow/pypi" / device / policy
        path.mkdir(parents=True, exist_ok=True)
        (path / f"bs{batch_size}.json").write_text(json.dumps(record))
    return folder


def test_two_machines_folders_make_one_report_with_a_section_each(tmp_path):
    laptop = _results(tmp_path / "laptop", "intel-i7-8565u-8c", "laptop", "2026-12-01T10:00:00")
    cluster = _results(tmp_path / "cluster", "amd-epyc-7b12-64c", "node07", "2026-12-01T11:00")
    out = tmp_path / "report"
    summary = write_report([], out, include=[str(laptop), str(cluster)])
    assert len(summary) == 2 * len(CPU_CELLS)
    assert set(summary["machine"]) == {"intel-i7-8565u-8c", "amd-epyc-7b12-64c"}
    assert set(summary["host"]) == {"laptop", "node07"}
    html = (out / "index.html").read_text()
    for machine in ("intel-i7-8565u-8c", "amd-epyc-7b12-64c"):
        assert f'<h2 class="machine" id="machine-{machine}">Machine {machine}</h2>' in html
        assert (out / machine / "seed_convnet/tensorflow/pypi/cpu/ms_per_step.png").is_file()
    side = html.split('<h2 id="machines">Machines compared</h2>', 1)[1].split("<h2", 1)[0]
    rows = side.split("<tr>")
    # Batch 32: both machines, then the published V100 and Quadro M2200 of 2020.
    at_32 = [r for r in rows if "<td>32</td>" in r]
    assert [m for m in ("amd-epyc-7b12-64c · cpu", "intel-i7-8565u-8c · cpu",
                        "published (2020) · Tesla V100", "published (2020) · Quadro M2200")
            if any(m in r for r in at_32)] == [
        "amd-epyc-7b12-64c · cpu", "intel-i7-8565u-8c · cpu", "published (2020) · Tesla V100",
        "published (2020) · Quadro M2200"]
    assert "mptbench 0.2.0, TensorFlow 2.21.0" in side and "Measured with different" not in side
    # Every row as wide as the head, a policy the 2020 machines lacked included.
    first = side.split("</table>", 1)[0].split("<tr>")
    widths = {r.count("<td") for r in first if "<td" in r}
    assert len(widths) == 1, widths
    fits = side.split("What fits where", 1)[1]
    quadro = fits.split("published (2020) · Quadro M2200", 1)[1].split("</tr>", 1)[0]
    assert "<td>128<small>larger: OOM</small></td>" in quadro.replace("\n", "")
    assert "not searched (sweep.fit_search=false)" in fits  # these records had no search


def test_records_of_another_version_say_so_in_the_table(tmp_path):
    new = _results(tmp_path / "a", "box-a", "a", "2026-12-01T10:00:00")
    old = _results(tmp_path / "b", "box-b", "b", "2026-11-01T10:00:00", version="0.1.0")
    write_report([], tmp_path / "report", include=[str(new), str(old)])
    side = (tmp_path / "report" / "index.html").read_text().split('id="machines"', 1)[1]
    assert "Measured with different mptbench" in side
    assert 'class="fail">mptbench 0.1.0' in side


def test_one_cell_measured_twice_is_an_error_naming_both_and_the_same_folder_counts_once(
    tmp_path,
):
    first = _results(tmp_path / "a", "box", "a", "2026-12-01T10:00:00")
    again = _results(tmp_path / "b", "box", "a", "2026-12-02T10:00:00")
    summary = write_report([], tmp_path / "once", include=[str(first), str(first)])
    assert len(summary) == len(CPU_CELLS)
    with pytest.raises(ReportError, match=r"was measured twice, at 2026-12-01T10:00:00 \("):
        write_report([], tmp_path / "twice", include=[str(first), str(again)])
    assert not (tmp_path / "twice").exists()  # nothing half-written


def test_a_folder_that_is_not_results_is_one_line(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ReportError, match=f"report.include: {missing} is not a results/"):
        write_report([], tmp_path / "report", include=[str(missing)])
    assert not (tmp_path / "report").exists()


def test_own_records_come_first_and_others_fill_in():
    own = [run_record(machine="a", model="m", backend="t", variant="v", device="cpu",
                      policy="p", batch_size=8, started_at="1")]
    other = [own[0] | {"_source": "elsewhere"}, own[0] | {"machine": "b", "_source": "x"}]
    assert [r["machine"] for r in merged(own, other)] == ["a", "b"]
    assert all("_source" not in r for r in merged(own, other))


@pytest.mark.slow
def test_an_mlflow_stores_cell_runs_join_the_report_the_latest_per_cell(tmp_path):
    """Every machine logged to one store: each finished cell run's record, the sweep's run
    left out, a cell run twice read from its latest run."""
    import mlflow

    from mptbench.core.links import RECORD_ARTIFACT, SWEEP_TAG

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment(
        EXPERIMENT, artifact_location=(tmp_path / "artifacts").as_uri()
    )
    client.set_terminated(
        client.create_run(experiment, tags={SWEEP_TAG: EXPERIMENT}).info.run_id
    )
    cell = make_record(*CPU_CELLS[0], machine="laptop")
    for started, ms in (("2026-12-01T10:00:00", 500.0), ("2026-12-02T10:00:00", 400.0)):
        run = client.create_run(experiment).info.run_id
        client.log_dict(run, cell | {"started_at": started, "ms_per_step": ms}, RECORD_ARTIFACT)
        client.set_terminated(run)
    other = make_record(*CPU_CELLS[1], machine="cluster")
    run = client.create_run(experiment).info.run_id
    client.log_dict(run, other, RECORD_ARTIFACT)
    client.set_terminated(run)
    unfinished = client.create_run(experiment).info.run_id  # still running: not read
    client.log_dict(unfinished, other | {"machine": "x"}, RECORD_ARTIFACT)

    found = load([f"mlflow:{uri}"], EXPERIMENT).records
    assert sorted(r["machine"] for r in found) == ["cluster", "laptop"]
    assert next(r for r in found if r["machine"] == "laptop")["ms_per_step"] == 400.0
    with pytest.raises(ReportError, match="has no experiment 'elsewhere'"):
        load([f"mlflow:{uri}#elsewhere"], EXPERIMENT)
