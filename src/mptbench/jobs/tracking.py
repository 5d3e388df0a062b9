"""MLflow: the store and the experiment, one parent run per experiment (the sweep), and one run
per grid cell nested under it."""

from __future__ import annotations

import os
import socket
import time
import unittest.mock
from pathlib import Path
from typing import Any

from mptbench.core.links import CELL_TAG, RECORD_ARTIFACT, SWEEP_TAG
from mptbench.core.outcomes import first_line


def _mlflow(uri: str):
    os.environ.setdefault("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "false")
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow


# The MLflow UI opens an experiment tagged so in its model-training view, on its runs (untagged,
# MLflow 3 opens it in its GenAI view, on traces).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}


def init_experiment(
    uri: str, name: str, artifact_root: str | None, system_metrics: bool = True
) -> dict[str, Any]:
    """Create (or find) the experiment and its sweep run. Run once, before any train job: a
    fresh sqlite store created by several processes at once races on its schema."""
    mlflow = _mlflow(uri)
    _create_sqlite_store(uri)
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
    for key, value in EXPERIMENT_TAGS.items():
        client.set_experiment_tag(experiment_id, key, value)
    return {
        "tracking_uri": uri,
        "experiment_name": name,
        "experiment_id": experiment_id,
        "parent_run_id": _sweep_run(client, experiment_id, name),
        "system_metrics": system_metrics,
    }


def _sqlite_file(uri: str) -> Path | None:
    """The file of a `sqlite:///` store; None for an in-memory one or a server."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def _create_sqlite_store(uri: str) -> None:
    """A new sqlite store, made whole or not at all: MLflow builds its schema in dozens of
    steps, and a run killed between two leaves a store no later run can open ("table ...
    already exists", "out-of-date database schema"). So the schema is built under a hidden
    name beside the store and linked to the store's name only when complete; a process that
    finds the store made by another meanwhile uses that one."""
    path = _sqlite_file(uri)
    if path is None or path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    _remove_abandoned(path, host)
    partial = path.with_name(f".{path.name}.{host}.{os.getpid()}.part")
    partial.unlink(missing_ok=True)
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    # The default artifact root MLflow gives a store it creates itself (its Default
    # experiment's); this project's experiments name their own.
    store = SqlAlchemyStore(f"sqlite:///{partial}", DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)
    store.engine.dispose()
    try:
        os.link(partial, path)  # unlike a rename, never replaces a store made meanwhile
    except FileExistsError:
        pass
    finally:
        for left in (partial, partial.with_name(f"{partial.name}-journal")):
            left.unlink(missing_ok=True)


def _remove_abandoned(path: Path, host: str) -> None:
    """Partial stores this machine's killed processes left, with sqlite's journal beside each
    (another machine's, on a shared disk, are its own to remove: their process ids mean
    nothing here)."""
    prefix = f".{path.name}.{host}."
    for partial in path.parent.glob(f"{prefix}*.part*"):
        pid = partial.name.removeprefix(prefix).split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            partial.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_run(client, experiment_id: str, name: str) -> str:
    """The experiment's parent run, made once: every cell's run is nested under it, so
    rerunning a cell keeps the tree whole."""
    found = client.search_runs(
        [experiment_id], filter_string=f"tags.`{SWEEP_TAG}` = '{name}'", max_results=1
    )
    if found:
        return found[0].info.run_id
    run = client.create_run(experiment_id, run_name=f"{name} (sweep)", tags={SWEEP_TAG: name})
    return run.info.run_id


# What one log_batch call may carry: MLflow refuses over 100 params or 100 tags, 1000 metrics,
# or 1000 entities in all.
BATCH_METRICS, BATCH_PARAMS_TAGS = 800, 100


def log_batch(client, run_id: str, metrics=(), params=(), tags=()) -> None:
    """Metrics ((key, value, step)), params and tags ((key, value)) of a run in as few requests
    as MLflow allows, where a call each would make one request per figure (each a password
    check on a server with basic auth)."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, step) for k, v, step in metrics]
    params = [Param(k, v) for k, v in params]
    tags = [RunTag(k, str(v)) for k, v in tags]
    while metrics or params or tags:
        client.log_batch(run_id, metrics=metrics[:BATCH_METRICS],
                         params=params[:BATCH_PARAMS_TAGS], tags=tags[:BATCH_PARAMS_TAGS])
        metrics, params = metrics[BATCH_METRICS:], params[BATCH_PARAMS_TAGS:]
        tags = tags[BATCH_PARAMS_TAGS:]


def log_figures(client, run_id: str, metrics: dict[str, float], tags: dict[str, Any]) -> None:
    """A run's figures (metrics at step 0) and tags, batched (log_batch)."""
    log_batch(client, run_id, [(k, v, 0) for k, v in metrics.items()], (), tags.items())


def log_to_cells(tracking: dict, results: dict[str, tuple[dict, dict]]) -> None:
    """What the report worked out per cell (speedups, MFU), as metrics and tags of its run."""
    client = _mlflow(tracking["tracking_uri"]).MlflowClient()
    for run_id, (metrics, tags) in results.items():
        log_figures(client, run_id, metrics, tags)


def finish_sweep(tracking: dict, report_dir: str, metrics: dict, tags: dict) -> None:
    """The sweep run holds the aggregate: the report's files, the headline figures."""
    client = _mlflow(tracking["tracking_uri"]).MlflowClient()
    parent = tracking["parent_run_id"]
    client.log_artifacts(parent, report_dir, "report")
    log_figures(client, parent, metrics, tags)
    client.set_terminated(parent, status="FINISHED")


def publish_report(
    tracking: dict, report_dir: str, cells: dict[str, tuple[dict, dict]], metrics: dict, tags: dict
) -> None:
    """What the report worked out, given back to MLflow: each cell's run its speedups and MFU
    (`cells`: by run id, metrics and tags), the sweep's run the report and its headline."""
    log_to_cells(tracking, cells)
    if tracking.get("parent_run_id"):
        finish_sweep(tracking, report_dir, metrics, tags)


def fail_sweep(tracking: dict) -> str | None:
    """A Snakemake run that ended with errors: its sweep run says FAILED (until a later run's
    report finishes it), not RUNNING with nothing running. Asks the store once, without the
    client's retries (minutes when a server is gone); returns why it could not, if so."""
    parent = tracking.get("parent_run_id")
    if not parent:
        return None
    quick = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    try:
        with unittest.mock.patch.dict(os.environ, quick):  # restored as it was afterwards
            client = _mlflow(tracking["tracking_uri"]).MlflowClient()
            if client.get_run(parent).info.status == "RUNNING":
                client.set_terminated(parent, status="FAILED")
        return None
    except Exception as exc:  # the store is what failed: say so, the run's errors come first
        return first_line(exc)


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
    so the store holds one run per cell however often a cell is rerun. Written through the
    client, by run id: a comparison group's job has all its cells' runs open at once."""

    def __init__(
        self,
        tracking: dict[str, Any],
        cell_label: str,
        run_name: str,
        tags: dict[str, Any] | None = None,
        sampling_s: float = 10,
    ):
        self.mlflow = _mlflow(tracking["tracking_uri"])
        self.uri = tracking["tracking_uri"]
        self.system_metrics = bool(tracking.get("system_metrics"))
        self.sampling_s = sampling_s
        self.client = self.mlflow.MlflowClient()
        self.experiment_id = tracking["experiment_id"]
        self.cell_label = cell_label
        self.run_name = run_name
        # Every grid axis as a tag, for the UI's search (tags.policy = 'mixed_float16').
        self.tags = {CELL_TAG: cell_label, **{k: str(v) for k, v in (tags or {}).items()}}
        if tracking.get("parent_run_id"):
            self.tags["mlflow.parentRunId"] = tracking["parent_run_id"]
        self.run = None
        self.monitor = None
        self.status = "FINISHED"  # how the run ends unless an exception ends it FAILED

    def __enter__(self):
        earlier = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{CELL_TAG}` = '{self.cell_label}'"
        )
        self.run = self.client.create_run(self.experiment_id, tags=self.tags,
                                          run_name=self.run_name)
        if self.system_metrics:
            self._monitor()
        for old in earlier:
            if old.info.status == "RUNNING":  # its job was killed (kill -9) before it could say so
                self.client.set_terminated(old.info.run_id, status="KILLED")
            self.client.delete_run(old.info.run_id)
        return self

    def _monitor(self) -> None:
        """CPU/GPU utilisation and memory beside the run (system/* metrics; GPUs via pynvml).
        Each sample also rereads the run from the store: sampled every 2 s it slowed the steps
        it overlapped by about 11% on 2 cores, so it samples every 10 s (every 10 s times the
        group's cells, for each cell of a comparison group)."""
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        self.monitor = SystemMetricsMonitor(
            self.run_id, sampling_interval=self.sampling_s, samples_before_logging=1,
            tracking_uri=self.uri,
        )
        self.monitor.start()

    @property
    def run_id(self) -> str:
        return self.run.info.run_id

    def _batch(self, metrics=(), params=(), tags=()) -> None:
        log_batch(self.client, self.run_id, metrics, params, tags)

    def log_params(self, params: dict[str, Any]) -> None:
        flat = {k: ("" if v is None else str(v))[:6000] for k, v in flatten(params).items()}
        self._batch(params=list(flat.items()))

    def log_fingerprint(self, fingerprint: dict[str, Any]) -> None:
        """The hardware and build facts as tags (searchable: tags.`fp.cpu.model` = '...')."""
        tags = {k: str(v)[:5000] for k, v in flatten(fingerprint, "fp").items() if v is not None}
        self._batch(tags=list(tags.items()))

    def log_artifacts(self, folder: str, name: str) -> None:
        self.client.log_artifacts(self.run_id, folder, name)

    def log_artifact(self, path: str, folder: str) -> None:
        self.client.log_artifact(self.run_id, path, folder)

    def log_dataset(self, prepared: dict[str, Any]) -> None:
        """The cache the cell read, as the run's input dataset (with its digest)."""
        from mlflow.data.dataset_source_registry import resolve_dataset_source
        from mlflow.data.meta_dataset import MetaDataset
        from mlflow.entities import DatasetInput, InputTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        if not prepared.get("data_dir"):  # dataset=synthetic: random tensors, nothing read
            self._batch(tags=[("dataset", f"{prepared['dataset']} (random tensors, no files)")])
            return
        source = resolve_dataset_source(str(prepared.get("source") or prepared["data_dir"]))
        name = f"{prepared['dataset']}-{prepared['image_size']}px"
        digest = prepared.get("digest")
        # MLflow keeps at most 36 characters of a digest: its first 16 there, all of it a tag.
        dataset = MetaDataset(source, name=name, digest=digest[:16] if digest else None)
        context = InputTag(key=MLFLOW_DATASET_CONTEXT, value="training")
        self.client.log_inputs(self.run_id, [DatasetInput(dataset._to_mlflow_entity(), [context])])
        if digest:
            self._batch(tags=[("dataset_sha256", digest)])

    def log_epochs(self, epochs: list[dict[str, Any]]) -> None:
        metrics = [
            (k, v, int(entry["epoch"])) for entry in epochs for k, v in entry.items()
            if k != "epoch"
        ]
        if metrics:
            self._batch(metrics=metrics)

    def finish(
        self, metrics: dict[str, float], tags: dict[str, Any], record: dict[str, Any]
    ) -> None:
        values = [(k, v, 0) for k, v in metrics.items() if v is not None]
        self._batch(metrics=values, tags=[(k, str(v)) for k, v in tags.items()])
        self.client.log_dict(self.run_id, record, RECORD_ARTIFACT)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            status = self.status
        elif issubclass(exc_type, Exception):
            status = "FAILED"
        else:  # stopped from outside: Ctrl-C, SIGTERM (scancel, a time limit)
            status = "KILLED"
        if self.monitor is not None:
            self.monitor.finish()
        self.client.set_terminated(self.run_id, status=status)
        return False


class NoRun:
    """A cell run kept out of MLflow (no tracking store given: bench/bench_gpu.py, on a machine
    with only the backend installed); the run record is written all the same."""

    run_id = None
    status = "FINISHED"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return False

    def __getattr__(self, name: str):
        if name.startswith("log_") or name == "finish":
            return lambda *args, **kwargs: None
        raise AttributeError(name)
