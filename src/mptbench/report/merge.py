"""Several machines in one report: the cells of other results/<experiment> folders (copied
from other machines, or a cluster's), and the run records an MLflow experiment holds (every
machine that logged to one server), beside this run's own.

A cell is keyed by its machine (core/hardware.py) and its other axes, so machines never
overwrite each other; the same cell twice (one folder included twice, or a machine's record
both here and on the server) is taken once, from the source named first, unless the two
disagree on when they were measured, which is an error naming both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mptbench.core.cells import AXES, key_of
from mptbench.core.contract import REPORTED
from mptbench.core.links import RECORD_ARTIFACT, SWEEP_TAG
from mptbench.report.records import ReportError, check_record, load_outputs, load_records

MLFLOW = "mlflow:"  # an include that names an MLflow store: mlflow:URI[#EXPERIMENT]


@dataclass
class Included:
    """What other sources add: run records (each with where it came from), calibrations, and
    the outputs of the job kinds the report reads (REPORTED: fits searches, parity runs), by
    kind."""

    records: list[dict[str, Any]] = field(default_factory=list)
    calibrations: list[Path] = field(default_factory=list)
    outputs: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {name: [] for name in REPORTED}
    )


def folder_files(folder: str | Path) -> dict[str, list[Path]]:
    """A results/<experiment> folder's files the report reads: its run records, the outputs of
    the job kinds it reads (by kind), and the calibrations beside it (results/calibration: the
    newest of each machine, backend, variant and device)."""
    root = Path(folder)
    if not (root / "runs").is_dir():
        raise ReportError(
            f"report.include: {folder} is not a results/<experiment> folder (it has no runs/)"
        )
    newest: dict[Path, Path] = {}
    for path in sorted((root.parent / "calibration").glob("*/*/*/*/*.json")):
        best = newest.get(path.parent)
        if best is None or path.stat().st_mtime > best.stat().st_mtime:
            newest[path.parent] = path
    return {
        "records": sorted((root / "runs").rglob("*.json")),
        **{name: sorted((root / kind.folder).rglob("*.json")) for name, kind in REPORTED.items()},
        "calibrations": sorted(newest.values()),
    }


def split(include: list[str]) -> tuple[list[str], list[str]]:
    """The folders and the MLflow stores among report.include."""
    stores = [s for s in include if s.startswith(MLFLOW)]
    return [s for s in include if not s.startswith(MLFLOW)], stores


def mlflow_records(source: str, experiment: str) -> list[dict[str, Any]]:
    """The run record of every finished cell run of an MLflow experiment (`source`:
    mlflow:URI, or mlflow:URI#EXPERIMENT for another experiment's), the latest per cell."""
    uri, _, name = source[len(MLFLOW) :].partition("#")
    try:
        found = cell_records(uri, name or experiment)
    except LookupError as exc:
        raise ReportError(f"report.include: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the store's own errors, as one line
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ReportError(f"report.include: cannot read {uri}: {why}") from None
    latest: dict[tuple, dict[str, Any]] = {}
    for run_id, record in found:  # newest first: a cell rerun keeps its latest run
        check_record(record, f"{uri} run {run_id}")
        latest.setdefault(key_of(record, AXES), record | {"_source": f"{uri} run {run_id}"})
    return list(latest.values())


def cell_records(uri: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    """(run id, run record) of every finished cell run of experiment `name` in the store at
    `uri`, newest first; runs without a record (the sweep's, older ones) are left out.
    LookupError: no such experiment."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(name)
    if found is None:
        raise LookupError(f"{uri} has no experiment {name!r}")
    runs = client.search_runs(
        [found.experiment_id], filter_string="attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"], max_results=50000,
    )
    out = []
    for run in runs:
        if SWEEP_TAG in run.data.tags:
            continue
        try:
            where = client.download_artifacts(run.info.run_id, RECORD_ARTIFACT)
            record = json.loads(Path(where).read_text())
        except Exception:  # noqa: BLE001 - MLflow raises several kinds for a missing artifact
            continue
        out.append((run.info.run_id, record))
    return out


def load(include: list[str], experiment: str | None) -> Included:
    """Everything the sources in `include` add (folders first, then MLflow stores)."""
    folders, stores = split(include)
    out = Included()
    for folder in folders:
        files = folder_files(folder)
        if files["records"]:
            out.records += [
                r | {"_source": str(p)}
                for r, p in zip(load_records(files["records"]), files["records"], strict=True)
            ]
        for name, kind in REPORTED.items():
            out.outputs[name] += load_outputs(files[name], kind.reported)
        out.calibrations += files["calibrations"]
    for store in stores:
        if experiment is None:
            raise ReportError(f"report.include: {store} names no experiment (add #NAME)")
        out.records += mlflow_records(store, experiment)
    return out


def merged(own: list[dict[str, Any]], others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Own records, then the others' cells that are not among them: each cell once."""
    seen: dict[tuple, dict[str, Any]] = {}
    out = []
    for record in [*own, *others]:
        key = key_of(record, AXES)
        first = seen.get(key)
        if first is None:
            seen[key] = record
            out.append(record)
        elif first.get("started_at") != record.get("started_at"):
            raise ReportError(
                f"cell {'/'.join(map(str, key))} was measured twice, at {first.get('started_at')} "
                f"({first.get('_source', 'this run')}) and at {record.get('started_at')} "
                f"({record.get('_source', 'this run')}): one machine's results under two "
                "sources; include one of them"
            )
    return [{k: v for k, v in r.items() if k != "_source"} for r in out]


def merged_outputs(own: list[dict], others: list[dict]) -> list[dict]:
    """A reported job kind's outputs (fits searches, parity runs), each group's once (own
    first)."""
    seen, out = set(), []
    for found in [*own, *others]:
        key = (*key_of(found), found.get("policy"), found.get("batch_size"))
        if key not in seen:
            seen.add(key)
            out.append(found)
    return out
