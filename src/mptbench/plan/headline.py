"""What a run that ended well prints: where its report is, how to open Snakemake's report and
the MLflow experiment (commands that run as printed: core/commands.py), and the headline the
aggregate wrote (report/headline.py), which opens with the answer per machine, model and device
(report/answer.py)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from mptbench.core.commands import program
from mptbench.core.links import experiment_link
from mptbench.plan import layout


def config_arguments(argv: list[str]) -> str:
    """This command line's --config values, shell-quoted (what a later command must repeat)."""
    values, taking = [], False
    for arg in argv[1:]:
        if arg in ("--config", "-C"):
            taking = True
        elif taking and arg.startswith("-"):
            taking = False
        elif taking:
            values.append(arg)
    return shlex.join(values)


def mlflow_page(tracking: dict[str, Any], experiment_id: str) -> str:
    """How to browse the experiment: its page in the UI (tracking.ui), else the store, with
    the command that serves a sqlite store's UI first."""
    uri, ui = str(tracking["uri"]), tracking["ui"] or ""
    page = experiment_link(ui, experiment_id) if ui else uri
    serve = f"{mlflow_ui(uri)}, then " if uri.startswith("sqlite:") else ""
    return f"{serve}open {page}"


def mlflow_ui(uri: str) -> str:
    return f"{program('mlflow')} ui --backend-store-uri {shlex.quote(uri)}"


def snakemake_report(experiment: str, argv: list[str]) -> str:
    """The command that writes Snakemake's own report of this run (its --config again)."""
    args = config_arguments(argv)
    return f"{program('snakemake')} --report results/{experiment}/report.zip" + (
        f" --config {args}" if args else ""
    )


def text(cfg: dict[str, Any], argv: list[str]) -> str | None:
    """The lines to print (paths relative to the working directory), or None before the
    aggregate wrote its headline."""
    experiment = cfg["name"]
    report_dir = layout.REPORT_DIR.format(experiment=experiment)
    headline = Path(report_dir) / layout.HEADLINE
    if not headline.exists():
        return None
    tracking = Path(layout.TRACKING.format(experiment=experiment))
    experiment_id = json.loads(tracking.read_text())["experiment_id"]
    lines = [
        "",
        f"mptbench {experiment}: the report is {report_dir}/{layout.INDEX_HTML} (tables: "
        f"{report_dir}/{layout.SUMMARY_CSV}, {report_dir}/{layout.BREAKDOWN_CSV})",
        f"  Snakemake's report: {snakemake_report(experiment, argv)}",
        f"  MLflow: {mlflow_page(cfg['tracking'], experiment_id)}",
        *(f"  {line}" for line in headline.read_text().splitlines()),
        "",
    ]
    return "\n".join(lines)
