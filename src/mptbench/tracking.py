"""MLflow: create the store and experiment once, then one run per grid cell."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def _mlflow(uri: str):
    os.environ.setdefault("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "false")
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow


def init_experiment(
    uri: str, name: str, artifact_root: str | None, system_metrics: bool = True
) -> dict[str, Any]:
    """Create (or find) the experiment. Run once, before any train job: a fresh sqlite store
    created by several processes at once races on its schema."""
    mlflow = _mlflow(uri)
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = None
        if artifact_root:
            location = (Path(artifact_root).resolve() / name).as_uri()
        experiment_id = client.create_experiment(name, artifact_location=location)
    else:
        if experiment.lifecycle_stage == "deleted":
            client.restore_experiment(experiment.experiment_id)
        experiment_id = experiment.experiment_id
    return {
        "tracking_uri": uri,
        "experiment_name": name,
        "experiment_id": experiment_id,
        "system_metrics": system_metrics,
    }


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay whole (as their text)."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        out.update(flatten(value, name) if isinstance(value, dict) and value else {name: value})
    return out


class CellRun:
    """The MLflow run of one grid cell; earlier runs of the same cell are moved to the trash,
    so the store holds one run per cell however often a cell is rerun."""

    def __init__(self, tracking: dict[str, Any], cell_label: str, run_name: str):
        self.mlflow = _mlflow(tracking["tracking_uri"])
        self.system_metrics = bool(tracking.get("system_metrics"))
        self.client = self.mlflow.MlflowClient()
        self.experiment_id = tracking["experiment_id"]
        self.cell_label = cell_label
        self.run_name = run_name
        self.run = None
        self.status = "FINISHED"  # how the run ends unless an exception ends it FAILED

    def __enter__(self):
        earlier = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`mptbench.cell` = '{self.cell_label}'"
        )
        if self.system_metrics:
            # CPU/GPU utilisation and memory beside the run (system/* metrics; GPUs via pynvml).
            # Each sample also rereads the run from the store: sampled every 2 s it slowed the
            # steps it overlapped by about 11% on 2 cores, so it samples every 10 s.
            self.mlflow.set_system_metrics_sampling_interval(10)
            self.mlflow.set_system_metrics_samples_before_logging(1)
        self.run = self.mlflow.start_run(
            experiment_id=self.experiment_id,
            run_name=self.run_name,
            tags={"mptbench.cell": self.cell_label},
            log_system_metrics=self.system_metrics,
        )
        for old in earlier:
            self.client.delete_run(old.info.run_id)
        return self

    @property
    def run_id(self) -> str:
        return self.run.info.run_id

    def log_params(self, params: dict[str, Any]) -> None:
        flat = {k: ("" if v is None else str(v))[:6000] for k, v in flatten(params).items()}
        items = list(flat.items())
        for i in range(0, len(items), 90):
            self.mlflow.log_params(dict(items[i : i + 90]))

    def log_fingerprint(self, fingerprint: dict[str, Any]) -> None:
        """The hardware and build facts as tags (searchable: tags.`fp.cpu.model` = '...')."""
        tags = {k: str(v)[:5000] for k, v in flatten(fingerprint, "fp").items() if v is not None}
        self.mlflow.set_tags(tags)

    def log_artifacts(self, folder: str, name: str) -> None:
        self.mlflow.log_artifacts(folder, name)

    def log_epochs(self, epochs: list[dict[str, Any]]) -> None:
        for entry in epochs:
            metrics = {k: v for k, v in entry.items() if k != "epoch"}
            self.mlflow.log_metrics(metrics, step=int(entry["epoch"]))

    def finish(
        self, metrics: dict[str, float], tags: dict[str, Any], record: dict[str, Any]
    ) -> None:
        self.mlflow.log_metrics({k: float(v) for k, v in metrics.items() if v is not None})
        self.mlflow.set_tags({k: str(v) for k, v in tags.items()})
        self.mlflow.log_dict(record, "run_record.json")

    def __exit__(self, exc_type, exc, tb):
        self.mlflow.end_run(status=self.status if exc_type is None else "FAILED")
        return False
