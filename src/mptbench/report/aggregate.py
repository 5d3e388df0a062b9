"""The aggregate step: run records and calibrations -> summary.csv, index.html, its plots and
the headline. Pure: it reads records and writes the report; what the report gives back to the
MLflow runs (speedups, MFU, the headline) it returns, and the aggregate job logs it
(jobs/tracking.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from mptbench.core.cells import key_of
from mptbench.core.contract import REPORTED
from mptbench.core.files import write_bytes
from mptbench.core.record import REPORT_METRICS, REPORT_TAGS
from mptbench.plan.layout import (
    BREAKDOWN_CSV,
    HEADLINE,
    INDEX_HTML,
    LAYERS_CSV,
    LEARNING_PLOT,
    SUMMARY_CSV,
    group_file,
)
from mptbench.report import merge, sections
from mptbench.report.breakdown import breakdown_table, layers_table
from mptbench.report.fits import fits_sections
from mptbench.report.headline import headline_lines
from mptbench.report.html import render_group_files, render_html
from mptbench.report.parity import learning_figure, learning_sections, parity_columns
from mptbench.report.plots import render_plots
from mptbench.report.published import load_published
from mptbench.report.records import ReportError, load_calibrations, load_outputs, load_records
from mptbench.report.sections import device_label
from mptbench.report.summary import groups, summarise


def cell_results(summary: pd.DataFrame) -> dict[str, tuple[dict, dict]]:
    """Per MLflow run id: what the report derives of the cell and gives back to its run (the
    derived fields flagged metric or tag in core/record.py: speedups, MFU, verdicts)."""
    out = {}
    for _, row in summary.dropna(subset=["mlflow_run_id"]).iterrows():
        metrics = {m: float(row[m]) for m in REPORT_METRICS if pd.notna(row[m])}
        tags = {t: row[t] for t in REPORT_TAGS if isinstance(row[t], str)}
        out[row["mlflow_run_id"]] = (metrics, tags)
    return out


def _short_name(row: pd.Series) -> str:
    """The device's name without its flags: a plot title has room for little more."""
    return device_label(row).split(" (CPU flags:")[0][:50]


def render(
    records: list[dict],
    calibrations: list,
    ui_url: str | None,
    outputs: dict[str, list[dict]] | None = None,
) -> tuple:
    """Every file of the report, in memory: (summary, {path relative to the report: bytes});
    `outputs`: the reported job kinds' (core/contract/kinds.py REPORTED), by kind."""
    fits, parity = (list((outputs or {}).get(name, ())) for name in ("fits", "parity"))
    summary = summarise(records, load_calibrations(list(calibrations)))
    summary = parity_columns(summary, parity)
    table = breakdown_table(records)
    published = load_published()
    extra = sections.Extra(fits_sections(fits, published), learning_sections(parity))
    files = render_plots(summary, published, _short_name, table)
    for key, _ in groups(summary):
        mine = [p for p in parity if key_of(p) == key]
        title = f"{' · '.join(key)}: does it still learn? (loss per step)"
        files[group_file(key, LEARNING_PLOT)] = learning_figure(mine, title)
    layers = layers_table(records)
    built = sections.all_groups(summary, table, extra, layers)  # the page's and its own files'
    files |= render_group_files(built)
    files[SUMMARY_CSV] = summary.to_csv(index=False).encode()
    files[BREAKDOWN_CSV] = table.to_csv(index=False).encode()
    files[LAYERS_CSV] = layers.to_csv(index=False).encode()
    files[INDEX_HTML] = render_html(summary, published, table, ui_url, extra, built).encode()
    files[HEADLINE] = "".join(f"{line}\n" for line in headline_lines(summary)).encode()
    return summary, files


def write_report(
    runs: str | Path | list[str | Path],
    report_dir: str | Path,
    calibrations: list[str | Path] = (),
    ui_url: str | None = None,
    outputs: dict[str, list[str | Path]] | None = None,
    include: list[str] = (),
) -> pd.DataFrame:
    """Read the run records (and `outputs`: the reported job kinds' output files, by kind: the
    fits searches, the parity runs), and what `include` adds (other machines' results folders,
    MLflow stores: report/merge.py); write the report into report_dir; return the summary.

    Everything is rendered in memory first, so a bad record leaves no output behind.
    """
    own = load_records(runs) if runs else []
    experiment = own[0]["experiment"] if own else None
    others = merge.load(list(include), experiment)
    records = merge.merged(own, others.records)
    if not records:
        raise ReportError("no run records given")
    found = {
        name: merge.merged_outputs(
            load_outputs(list((outputs or {}).get(name, ())), kind.reported), others.outputs[name]
        )
        for name, kind in REPORTED.items()
    }
    summary, files = render(records, [*others.calibrations, *calibrations], ui_url, found)
    try:
        for name, data in files.items():
            write_bytes(Path(report_dir) / name, data)
    except OSError as exc:
        raise ReportError(f"cannot write the report: {exc}") from None
    return summary


def main(argv: list[str] | None = None) -> int:
    """Aggregate by hand: python -m mptbench.report.aggregate --runs results/smoke/runs ..."""
    parser = argparse.ArgumentParser(description="Aggregate run records into the report.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", help="folder of run records (*.json, searched recursively)")
    source.add_argument("--records", nargs="+", help="the run records to report, exactly these")
    source.add_argument(
        "--include", nargs="+",
        help="results/<experiment> folders of several machines (their runs, fits, parity and "
        "calibrations), or mlflow:URI#EXPERIMENT: one report of all of them",
    )
    parser.add_argument("--calibration", nargs="*", default=[], help="calibrate rule outputs")
    parser.add_argument("--report-dir", required=True, help="where summary.csv, index.html, ... go")
    parser.add_argument("--ui-url", default=None, help="the MLflow UI, for links to each run")
    for name in REPORTED:
        parser.add_argument(f"--{name}", nargs="*", default=[], help=f"{name} rule outputs")
    args = parser.parse_args(argv)
    outputs = {name: getattr(args, name) for name in REPORTED}
    try:
        write_report(args.records or args.runs, args.report_dir, args.calibration, args.ui_url,
                     outputs, args.include or [])
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
