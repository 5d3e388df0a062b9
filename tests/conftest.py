"""Shared pytest fixtures: a loopback HTTP server, small archives, a prepared cache, MLflow."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from httpserver import FileServer
from workflow_helpers import copy_workflow, snakemake, warm_copy

from mptbench.data.fixtures import make_imagenette_archive
from mptbench.jobs import device_lock


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


def _prepared(tmp_path_factory, size: int) -> dict:
    from mptbench.data import cache as dataset

    root = tmp_path_factory.mktemp(f"prepared{size}")
    made = make_imagenette_archive(
        root / "a.tgz", train_per_class=4, val_per_class=2, short_side=40
    )
    return dataset.prepare(made["path"], "imagenette-test", size, root / "tfds", log=lambda _: None)


@pytest.fixture(scope="session")
def prepared32(tmp_path_factory) -> dict:
    """A tfds cache of 32x32 images (4 train, 2 validation per class), as the prepare rule makes."""
    return _prepared(tmp_path_factory, 32)


@pytest.fixture(scope="session")
def prepared16(tmp_path_factory) -> dict:
    """The same at 16x16, the smoke's size: where mixed_float16 trains on a CPU, which emulates
    float16 at a cost that grows with the pixels."""
    return _prepared(tmp_path_factory, 16)


@pytest.fixture
def tracking(tmp_path) -> dict:
    """A fresh MLflow sqlite store with one experiment, as the tracking_init rule makes."""
    from mptbench.jobs.tracking import init_experiment

    return init_experiment(
        f"sqlite:///{tmp_path / 'mlflow.db'}", "test", str(tmp_path / "artifacts")
    )


@pytest.fixture(scope="session", autouse=True)
def device_locks(tmp_path_factory):
    """Each worker's timing jobs hold device locks of their own (jobs/device_lock.py): one
    worker's jobs never overlap, while two workers' may. On a user's machine a timing job waits
    for any other; here that made the workers take turns on every timing job, idling the CPU
    while one of them calibrated, and no test reads a timing precise enough to need it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(device_lock.ENV, str(tmp_path_factory.getbasetemp() / "device-locks"))
        yield


@pytest.fixture(scope="session")
def tf():
    """TensorFlow started in this process as an engine job starts it."""
    from mptbench.engine import backends

    return backends.start("tensorflow")


# README's test command runs the suite on three workers (pytest-xdist, --dist loadfile; a third
# fills the time the other two wait on subprocesses, SLURM and servers): a file's tests run on
# one worker, in order (a workflow file's share a checkout), files in the order below first
# (--no-loadscope-reorder keeps it), the short ones filling in around them. A worker is given
# its next file when two tests of its current one are left. Files that read the smoke run share
# it with every worker (smoke_run): the first file's worker runs it, and the next four files
# need none of it, so the other workers train beside it instead of waiting on it (with two such
# files, two workers waited from about 2 to 5 minutes in); then the longest that start from it.
FIRST = ("test_faults.py", "jobs/test_fits.py", "jobs/test_environment.py",
         "test_without_tensorflow.py", "jobs/test_supervisor.py",
         "test_slurm.py", "test_smoke_backends.py", "test_torch.py", "test_faults_jobs.py",
         "test_variants.py", "test_workflow.py", "test_machines.py", "test_browser.py")
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    missing = [name for name in FIRST if not (TESTS / name).is_file()]
    if missing:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py FIRST names no such file: {missing}")

    def rank(item) -> int:
        name = item.path.relative_to(TESTS).as_posix()
        return FIRST.index(name) if name in FIRST else len(FIRST)

    items.sort(key=rank)  # stable: a file's tests keep their order


def _shared_root(tmp_path_factory) -> Path:
    """A folder every worker of this pytest run shares (pytest-xdist's workers each have a
    basetemp of their own below it); without workers, the run's basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One run of the smoke experiment in a fresh copy of the workflow, shared by every test
    (every worker's) that reads its results; returns (checkout, the run's combined output).
    The first worker to ask runs it, the others wait on a lock and read what it left."""
    root = _shared_root(tmp_path_factory)
    checkout, said, failed = (root / f"smoke_checkout{end}" for end in ("", ".out", ".failed"))
    with open(root / "smoke_checkout.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not said.exists() and not failed.exists():
            _run_smoke(checkout, said, failed, root / "warm")
    if failed.exists():
        pytest.fail(f"the smoke run failed:\n{failed.read_text()}")
    return checkout, said.read_text()


def _run_smoke(checkout: Path, said: Path, failed: Path, warm: Path) -> None:
    checkout.mkdir()
    copy_workflow(checkout)
    # 4 cells (2 policies x 2 batch sizes) and every rule once: under 3 minutes on 2 cores,
    # and four times that on a busy host; every workflow test waits on it, so its guard
    # against a hang is generous.
    done = snakemake(checkout, "--cores", "2", "--config", "experiment=smoke", timeout=1800)
    if done.returncode != 0:
        failed.write_text(done.stderr[-3000:])
        return
    # What warm copies start from, frozen before any test runs more in the checkout.
    warm.mkdir()
    warm_copy(checkout, warm)
    said.write_text(done.stdout + done.stderr)


@pytest.fixture(scope="session")
def warm(smoke_run, tmp_path_factory) -> Path:
    """What a warm_copy starts from: the smoke run's cache, environment, calibrations and model
    descriptions, as the smoke run left them."""
    return _shared_root(tmp_path_factory) / "warm"
