"""Aggregate every run record into summary.csv and index.html (tables, diagnosis, plots)."""

from _job import run

from mptbench.files import read_json
from mptbench.report.aggregate import write_report
from mptbench.report.records import ReportError


def work():
    output = snakemake.output
    write_report(
        list(snakemake.input.records), output.summary, output.html,
        list(snakemake.input.calibrations), read_json(snakemake.input.tracking),
    )  # fmt: skip


run(snakemake, work, (ReportError,))
