"""Aggregate every run record into the report (summary.csv, index.html, per-device files), then
give each of this run's cells' MLflow runs its speedups and MFU (cells included from other
machines keep theirs where they were logged), and the sweep's run the report."""

from _job import run

from mptbench.core.contract import REPORTED
from mptbench.core.files import read_json
from mptbench.jobs.tracking import publish_report
from mptbench.report.aggregate import cell_results, write_report
from mptbench.report.headline import metrics_and_tags
from mptbench.report.records import ReportError


def work():
    report_dir, inputs = snakemake.params.report_dir, snakemake.input
    outputs = {name: list(getattr(inputs, name, [])) for name in REPORTED}
    summary = write_report(
        list(inputs.records), report_dir, list(inputs.calibrations),
        snakemake.params.ui_url or None, outputs, list(snakemake.params.include),
    )
    ours = {read_json(p).get("mlflow_run_id") for p in inputs.records}
    cells = {run: found for run, found in cell_results(summary).items() if run in ours}
    publish_report(
        read_json(snakemake.input.tracking), report_dir, cells, *metrics_and_tags(summary)
    )


run(snakemake, work, (ReportError,))
