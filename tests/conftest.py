"""Shared pytest fixtures: a loopback HTTP server, small archives, a prepared cache, MLflow."""

from __future__ import annotations

from pathlib import Path

import pytest
from httpserver import FileServer
from workflow_helpers import copy_workflow, snakemake

from mptbench.data.fixtures import make_imagenette_archive


@pytest.fixture
def http_server(tmp_path):
    """A FileServer on 127.0.0.1 serving `tmp_path / "served"`; stopped after the test."""
    with FileServer(tmp_path / "served") as server:
        yield server


@pytest.fixture(scope="session")
def fixture_archive(tmp_path_factory) -> dict:
    """One small imagenette2-320.tgz (3 train and 1 val image per class, 40 px short side)."""
    path = tmp_path_factory.mktemp("imagenette") / "imagenette2-320.tgz"
    return make_imagenette_archive(path, train_per_class=3, val_per_class=1, short_side=40)


@pytest.fixture(scope="session")
def prepared32(tmp_path_factory) -> dict:
    """A tfds cache of 32x32 images (4 train, 2 validation per class), as the prepare rule makes."""
    from mptbench.data import cache as dataset

    root = tmp_path_factory.mktemp("prepared32")
    made = make_imagenette_archive(
        root / "a.tgz", train_per_class=4, val_per_class=2, short_side=40
    )
    return dataset.prepare(made["path"], "imagenette-test", 32, root / "tfds", log=lambda _: None)


@pytest.fixture
def tracking(tmp_path) -> dict:
    """A fresh MLflow sqlite store with one experiment, as the tracking_init rule makes."""
    from mptbench.jobs.tracking import init_experiment

    return init_experiment(
        f"sqlite:///{tmp_path / 'mlflow.db'}", "test", str(tmp_path / "artifacts")
    )


@pytest.fixture(scope="session")
def tf():
    """TensorFlow started in this process as an engine job starts it."""
    from mptbench.engine import backends

    return backends.start("tensorflow")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One run of the smoke experiment in a fresh copy of the workflow, shared by every test
    that reads its results and by every workflow test that starts from its checkout (warm_copy);
    returns (checkout, the run's combined output)."""
    checkout = copy_workflow(tmp_path_factory.mktemp("smoke_checkout"))
    # 4 cells (2 policies x 2 batch sizes) and every rule once: under 3 minutes on 2 cores.
    done = snakemake(checkout, "--cores", "2", "--config", "experiment=smoke", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return checkout, done.stdout + done.stderr


@pytest.fixture(scope="session")
def warm(smoke_run) -> Path:
    """The checkout a warm_copy starts from: the smoke run's."""
    return smoke_run[0]
