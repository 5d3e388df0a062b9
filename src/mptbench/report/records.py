"""Read what the report is built from: run records and calibrations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mptbench.core import frameworks
from mptbench.core.record import REQUIRED


class ReportError(Exception):
    """Something a user must fix before the report can be written; the message is one line."""


def _read(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: unreadable {what} ({exc})") from None


def _paths(source: str | Path | list[str | Path]) -> list[Path]:
    if isinstance(source, list | tuple):
        if not source:
            raise ReportError("no run records given")
        return sorted(Path(p) for p in source)
    runs_dir = Path(source)
    if not runs_dir.is_dir():
        raise ReportError(f"{runs_dir}: no such folder of run records")
    paths = sorted(runs_dir.rglob("*.json"))
    if not paths:
        raise ReportError(f"no run records (*.json) under {runs_dir}")
    return paths


def load_records(source: str | Path | list[str | Path]) -> list[dict[str, Any]]:
    """Run records: every *.json under a folder (recursively), or exactly the files listed."""
    records = []
    for path in _paths(source):
        record = _read(path, "run record")
        check_record(record, str(path))
        records.append(record)
    return records


def check_record(record: Any, where: str) -> None:
    """A run record the report can read, or ReportError naming `where` it came from."""
    if not isinstance(record, dict):
        raise ReportError(f"{where}: not a run record (expected a JSON object)")
    missing = [k for k in REQUIRED if record.get(k) is None]
    if missing:
        raise ReportError(f"{where}: run record lacks {', '.join(missing)}")


def load_calibrations(paths: list[str | Path]) -> dict[tuple[str, ...], dict[str, Any]]:
    """The calibrate rule's peaks, keyed by (machine, backend, variant, device), each with the
    file it was read from (its name is the calibration's key)."""
    peaks = {}
    for path in paths:
        data = _read(Path(path), "calibration")
        key = (
            str(data.get("machine") or "local"),
            str(data.get("backend") or frameworks.DEFAULT.name),
            str(data["variant"]),
            str(data["device"]),
        )
        peaks[key] = data | {"file": str(path)}
    return peaks


def load_outputs(paths: list[str | Path], what: str) -> list[dict[str, Any]]:
    """The fits or parity rules' JSONs, as they are."""
    found = []
    for path in paths:
        data = _read(Path(path), what)
        if not isinstance(data, dict):
            raise ReportError(f"{path}: not a {what} (expected a JSON object)")
        found.append(data)
    return found
