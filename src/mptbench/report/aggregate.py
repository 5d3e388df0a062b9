"""The aggregate step: run records and calibrations -> summary.csv, index.html and its plots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from mptbench.config.layout import BREAKDOWN_CSV
from mptbench.files import write_bytes
from mptbench.report.breakdown import breakdown_table
from mptbench.report.html import device_label, render_html
from mptbench.report.plots import render_plots
from mptbench.report.published import load_published
from mptbench.report.records import ReportError, load_calibrations, load_records
from mptbench.report.summary import summarise


def _short_name(row: pd.Series) -> str:
    """The device's name without its flags: a plot title has room for little more."""
    return device_label(row).split(" (CPU flags:")[0][:50]


# What the report works out per cell and gives back to the cell's MLflow run.
SPEEDUP_METRICS = (
    "speedup_vs_float32",
    "speedup_ci_low",
    "speedup_ci_high",
    "speedup_compute",
    "speedup_compute_ci_low",
    "speedup_compute_ci_high",
    "mfu",
    "mfu_compute",
    "peak_tflops",
)


def log_to_runs(summary: pd.DataFrame, tracking: dict) -> None:
    """Each cell's speedups (with their intervals) and MFU, as metrics of its MLflow run."""
    import mlflow

    client = mlflow.MlflowClient(tracking["tracking_uri"])
    for _, row in summary.dropna(subset=["mlflow_run_id"]).iterrows():
        metrics = {m: float(row[m]) for m in SPEEDUP_METRICS if pd.notna(row[m])}
        for name, value in metrics.items():
            client.log_metric(row["mlflow_run_id"], name, value)
        if isinstance(row["speedup_verdict"], str):
            client.set_tag(row["mlflow_run_id"], "speedup_verdict", row["speedup_verdict"])


def write_report(
    runs: str | Path | list[str | Path],
    summary_path: str | Path,
    html_path: str | Path,
    calibrations: list[str | Path] = (),
    tracking: dict | None = None,
) -> pd.DataFrame:
    """Read the run records; write summary.csv, index.html and its plots; return the summary.

    Everything is rendered in memory first, so a bad record leaves no output behind. With
    `tracking`, each cell's MLflow run gets its speedups and MFU.
    """
    records = load_records(runs)
    summary = summarise(records, load_calibrations(list(calibrations)))
    table = breakdown_table(records)
    published = load_published()
    html_path = Path(html_path)
    plots = render_plots(summary, published, _short_name, table)
    page = render_html(summary, published, list(plots), table)
    try:
        for name, png in plots.items():
            write_bytes(html_path.parent / name, png)
        write_bytes(summary_path, summary.to_csv(index=False).encode())
        breakdown_csv = Path(summary_path).with_name(BREAKDOWN_CSV)
        write_bytes(breakdown_csv, table.to_csv(index=False).encode())
        write_bytes(html_path, page.encode())
    except OSError as exc:
        raise ReportError(f"cannot write the report: {exc}") from None
    if tracking:
        log_to_runs(summary, tracking)
    return summary


def main(argv: list[str] | None = None) -> int:
    """Aggregate by hand: python -m mptbench.report.aggregate --runs results/smoke/runs ..."""
    parser = argparse.ArgumentParser(description="Aggregate run records into the report.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", help="folder of run records (*.json, searched recursively)")
    source.add_argument("--records", nargs="+", help="the run records to report, exactly these")
    parser.add_argument("--calibration", nargs="*", default=[], help="calibrate rule outputs")
    parser.add_argument("--summary", required=True, help="summary.csv to write")
    parser.add_argument("--html", required=True, help="index.html to write; plots go beside it")
    args = parser.parse_args(argv)
    try:
        write_report(args.records or args.runs, args.summary, args.html, args.calibration)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
