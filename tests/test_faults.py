"""The fault matrix, the data's half: each fault provoked for real on a one-cell grid, then the
same command run again (after `snakemake --unlock` where Snakemake asks for it). After each:
every cell has exactly one record and one finished MLflow run (earlier attempts in MLflow's
trash, none left RUNNING), nothing half-written is left where a job would trust it, and the
report has a clean run's rows and columns. The jobs' and the MLflow server's faults are in
test_faults_jobs.py (a file of its own, so two workers run the halves side by side); `scancel`
of a job is tried in test_slurm.py, where the test cluster runs. README's "When things go wrong"
lists what each fault needs from the user."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import faults
import pytest
from faults import checkout_fixture, clean_fixture  # noqa: F401 - the fixtures checkout, clean
from httpserver import FileServer
from workflow_helpers import SMOKE_PX, copy_workflow, snakemake, wait_for

from mptbench.data.fixtures import make_imagenette_archive

pytestmark = [pytest.mark.slow, pytest.mark.workflow]


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A slow mirror of the archive on loopback: a download takes seconds, not milliseconds."""
    root = tmp_path_factory.mktemp("mirror")
    archive = make_imagenette_archive(
        root / "served" / "imagenette2-320.tgz", train_per_class=12, val_per_class=2,
        short_side=320,
    )
    with FileServer(root / "served") as server:
        # ~10 s for the archive: time to kill it midway.
        server.bytes_per_second = Path(archive["path"]).stat().st_size / 10
        yield server, archive


def test_kill_9_during_the_download(checkout, clean, mirror):
    server, archive = mirror
    remote = [f"dataset.url={server.url('imagenette2-320.tgz')}", "dataset.sha256_url=null",
              f"dataset.sha256={archive['sha256']}", "dataset.name=mirror-smoke"]
    downloads = checkout / "resources" / "downloads"
    process = faults.start(checkout, "f_download", *remote)
    parts = lambda: [p for p in downloads.glob("*.part") if p.stat().st_size > 0]  # noqa: E731
    (part,) = wait_for(parts, process, "a partial download on disk")
    faults.kill_all(process)
    assert 0 < part.stat().st_size < Path(archive["path"]).stat().st_size
    assert not (downloads / "imagenette2-320.tgz").exists()  # only the .part, never trusted
    _, unlocked = faults.rerun(checkout, "f_download", *remote)
    assert unlocked
    faults.assert_whole(checkout, "f_download", clean)
    # The rerun resumed the download where it stopped (an HTTP Range request).
    assert any(r.range for r in server.requests)


def test_kill_9_while_the_cache_is_built(checkout, clean):
    # A cache not built yet, of the same images at the same size: the calibration and the
    # model's description stand (a new size would measure both again).
    another = ["dataset.name=rebuilt-smoke"]
    process = faults.start(checkout, "f_prepare", *another)
    tfds = checkout / "resources" / "tfds"
    wait_for(lambda: list(tfds.rglob("*incomplete*")), process, "cache build")
    faults.kill_all(process)
    assert not (tfds / f"rebuilt-smoke-{SMOKE_PX}px.json").exists()
    faults.rerun(checkout, "f_prepare", *another)
    faults.assert_whole(checkout, "f_prepare", clean)


def test_a_corrupted_shard_is_found_before_a_cell_reads_it(checkout, clean):
    prepared = checkout / f"resources/tfds/imagenette2-320-smoke-{SMOKE_PX}px.json"
    info = json.loads(prepared.read_text())
    folder = Path(info["data_dir"]) / info["builder"] / info["config"] / info["version"]
    folder = folder if folder.is_absolute() else checkout / folder
    shard = sorted(folder.glob("*train.tfrecord*"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])  # truncated
    done = snakemake(checkout, "--cores", "2", *faults.config("f_corrupt"))
    assert done.returncode != 0
    (log,) = (checkout / "results/f_corrupt/logs/train").rglob("*.log")
    line = log.read_text().strip().splitlines()[-1]
    assert line.startswith("error: ") and "the cache differs from the one built" in line
    assert not list((checkout / "results/f_corrupt/runs").rglob("*.json"))
    # What the line says to do: remove the cache and its prepared file, run again.
    command = line.split("rebuild it: ", 1)[1].removesuffix(", then rerun")
    subprocess.run(command, shell=True, cwd=checkout, check=True)  # noqa: S602 - our own words
    faults.rerun(checkout, "f_corrupt")
    faults.assert_whole(checkout, "f_corrupt", clean)


@contextlib.contextmanager
def _small_disk(folder: Path, size: str):
    """A tmpfs of `size` mounted on `folder` (hiding what is there until it is unmounted):
    a disk that fills up. Needs root; skipped elsewhere."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True, text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def _data(checkout: Path, name: str, *more: str) -> subprocess.CompletedProcess:
    return snakemake(checkout, "data", "--cores", "2", *faults.config(name, *more), timeout=600)


def test_a_full_disk_while_downloading_and_while_building_the_cache(checkout, clean, mirror):
    server, archive = mirror
    server.bytes_per_second = None
    served = Path(archive["path"]).with_name("imagenette2-320-full.tgz")
    served.write_bytes(Path(archive["path"]).read_bytes())
    remote = [f"dataset.url={server.url(served.name)}", "dataset.sha256_url=null",
              f"dataset.sha256={archive['sha256']}", "dataset.name=full-smoke"]
    downloads, tfds = checkout / "resources/downloads", checkout / "resources/tfds"
    with _small_disk(downloads, "64k"):
        done = _data(checkout, "f_full", *remote)
        assert done.returncode != 0
        log = checkout / "resources/logs/download/imagenette2-320-full.tgz.log"
        line = log.read_text().strip().splitlines()[-1]
        assert line.startswith("error: disk full while writing ") and line.endswith(" written)")
        assert not (downloads / served.name).exists()
    with _small_disk(tfds, "96k"):
        done = _data(checkout, "f_full", *remote)
        assert done.returncode != 0
        log = (checkout / f"resources/logs/prepare/full-smoke-{SMOKE_PX}px.log").read_text()
        (line,) = [x for x in log.splitlines() if x.startswith("error: ")]  # tfds' bars aside
        assert line == (
            "error: disk full while building the cache in resources/tfds: free space there and "
            "rerun (the partial build is in an incomplete.* folder, which no run reads)"
        )
    assert not (tfds / f"full-smoke-{SMOKE_PX}px.json").exists()
    faults.rerun(checkout, "f_full", *remote)
    faults.assert_whole(checkout, "f_full", clean)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--cores", "0", "--config", "experiment=smoke"],
         "mptbench: --cores 0 leaves no core for any job; give --cores N or --cores all"),
        (["-n", "--config", "experiment=smoke", "overrides=[sweep.batch_sizes=[4,8]"],
         "mptbench config: override 'sweep.batch_sizes=[4,8' does not parse: "),
        (["-n", "--config", "experiment=smoke", 'overrides=["policy=[float32", "x"'],
         "mptbench config: override '[\"policy=[float32\", \"x' does not parse: "),
        (["-n", "--config", "experiement=smoke"],
         "mptbench config: --config experiement=...: unknown key 'experiement'"),
        (["-n", "--profile", "profiles/slurm", "--config", "experiment=smoke"],
         "mptbench profile: profiles/slurm/config.yaml: fill in default-resources.slurm_account,"),
    ],
)
def test_bad_input_stops_before_any_job_with_one_line(tmp_path, args, line):
    checkout = copy_workflow(tmp_path)
    done = snakemake(checkout, *args, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert sum(x.startswith(line) for x in output.splitlines()) == 1, output[-2000:]
    assert not (checkout / "results").exists() and not (checkout / "resources").exists()
