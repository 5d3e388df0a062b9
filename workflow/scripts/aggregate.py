"""Aggregate every run record into the report (summary.csv, index.html, per-device files)."""

from _job import run

from mptbench.files import read_json
from mptbench.report.aggregate import write_report
from mptbench.report.records import ReportError


def work():
    write_report(
        list(snakemake.input.records), snakemake.params.report_dir,
        list(snakemake.input.calibrations), read_json(snakemake.input.tracking),
        snakemake.params.ui_url or None,
    )  # fmt: skip


run(snakemake, work, (ReportError,))
