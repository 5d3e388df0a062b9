"""The CIFAR-10 pickle-tarball fixture and the tfds cache the project builds from it."""

import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from mptbench.data import cache as dataset
from mptbench.data import cifar10 as cifar
from mptbench.data.builder import DatasetError
from mptbench.data.fixtures import make_cifar10_archive

pytestmark = pytest.mark.slow

TOP = "cifar-10-batches-py"
QUIET = {"log": lambda _: None, "kind": "cifar10"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("archive") / "cifar-10-python.tar.gz"
    return make_cifar10_archive(path, train_per_class=4, test_per_class=2)


@pytest.fixture(scope="module")
def prepared(archive, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("tfds")
    return dataset.prepare(archive["path"], "cifar10-test", 32, data_dir, **QUIET)


def _batches(path):
    """Every member of the archive, unpickled as the original's readers do."""
    with tarfile.open(path) as tar:
        members = tar.getmembers()
        loaded = {
            m.name: pickle.load(tar.extractfile(m), encoding="bytes")
            for m in members
            if m.isfile() and not m.name.endswith(".html")
        }
    return members, loaded


def _files(root):
    return {p: p.stat().st_mtime_ns for p in Path(root).rglob("*") if p.is_file()}


def test_fixture_has_the_real_layout_and_unpickles_like_the_original(archive):
    members, loaded = _batches(archive["path"])
    names = {f"data_batch_{i}" for i in range(1, 6)} | {"test_batch", "batches.meta"}
    assert {m.name for m in members} == {f"{TOP}/{n}" for n in names | {"readme.html"}} | {TOP}
    assert {m.mtime for m in members} == {0}
    meta = loaded[f"{TOP}/batches.meta"]
    assert set(meta) == {b"label_names", b"num_cases_per_batch", b"num_vis"}
    assert meta[b"label_names"] == [n.encode() for n in cifar.CIFAR10_CLASSES]
    assert meta[b"num_vis"] == 3072
    counts = {}
    for name in names - {"batches.meta"}:
        batch = loaded[f"{TOP}/{name}"]
        assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
        data = batch[b"data"]
        assert data.dtype == np.uint8 and data.ndim == 2 and data.shape[1] == 3072
        assert len(batch[b"labels"]) == len(batch[b"filenames"]) == len(data)
        assert all(isinstance(x, int) for x in batch[b"labels"])
        assert all(isinstance(x, bytes) for x in batch[b"filenames"])
        counts[name] = len(data)
    assert counts["test_batch"] == archive["validation"] == 20
    assert sum(counts.values()) - counts["test_batch"] == archive["train"] == 40
    assert all(counts[f"data_batch_{i}"] > 0 for i in range(1, 6))  # spread over all five


def test_same_arguments_give_the_same_bytes(tmp_path):
    a = make_cifar10_archive(tmp_path / "a.tar.gz", train_per_class=2, test_per_class=1)
    b = make_cifar10_archive(tmp_path / "b.tar.gz", train_per_class=2, test_per_class=1)
    c = make_cifar10_archive(tmp_path / "c.tar.gz", 2, 1, seed=1)
    assert a["sha256"] == b["sha256"] != c["sha256"]


def test_cache_holds_the_archive_pixels_exactly(prepared, archive):
    assert prepared["splits"] == {"train": 40, "validation": 20}
    assert prepared["classes"] == list(cifar.CIFAR10_CLASSES)
    _, train = dataset.load(prepared, "train")
    images, labels = zip(*[(x.numpy(), int(y)) for x, y in train], strict=True)
    assert {img.shape for img in images} == {(32, 32, 3)}
    assert {img.dtype for img in images} == {np.dtype("uint8")}
    assert sorted(set(labels)) == list(range(10))
    # Every validation image equals its archive row (R, G, B planes) after the png round trip.
    _, loaded = _batches(archive["path"])
    test = loaded[f"{TOP}/test_batch"]
    rows = {
        name.decode(): (row.reshape(3, 32, 32).transpose(1, 2, 0), label)
        for name, row, label in zip(test[b"filenames"], test[b"data"], test[b"labels"], strict=True)
    }
    b, _ = dataset.load(prepared, "validation")
    seen = 0
    for ex in b.as_dataset(split="validation", shuffle_files=False):
        expected, label = rows[ex["file_name"].numpy().decode()]
        assert np.array_equal(ex["image"].numpy(), expected)
        assert int(ex["label"]) == label
        seen += 1
    assert seen == 20


def test_second_prepare_is_a_no_op(prepared, archive):
    before = _files(prepared["data_dir"])
    again = dataset.prepare(archive["path"], "cifar10-test", 32, prepared["data_dir"], **QUIET)
    assert again == {**prepared, "seconds": again["seconds"]}
    assert _files(prepared["data_dir"]) == before


def test_another_size_builds_a_new_cache_beside_the_old(prepared, archive):
    other = dataset.prepare(archive["path"], "cifar10-test", 16, prepared["data_dir"], **QUIET)
    assert other["config"] != prepared["config"]
    root = Path(prepared["data_dir"]) / prepared["builder"]
    assert prepared["builder"] == "mptbench_cifar10"
    assert (root / prepared["config"] / prepared["version"] / "dataset_info.json").exists()
    assert (root / other["config"] / other["version"] / "dataset_info.json").exists()
    _, train = dataset.load(other, "train")
    assert next(iter(train))[0].shape == (16, 16, 3)


def test_corrupt_batch_fails_with_its_name_and_leaves_no_cache(tmp_path):
    path = tmp_path / "bad.tar.gz"
    make_cifar10_archive(path, 2, 1, corrupt_batch="data_batch_3")
    with pytest.raises(DatasetError) as info:
        dataset.prepare(path, "cifar10-bad", 32, tmp_path / "tfds", **QUIET)
    assert f"{TOP}/data_batch_3" in str(info.value) and str(path) in str(info.value)
    # Nothing complete is left where a later run would look for the cache.
    assert not list((tmp_path / "tfds").rglob("dataset_info.json"))


def test_a_pickle_naming_other_globals_is_refused():
    payload = pickle.dumps({b"data": os.getcwd}, protocol=2)
    with pytest.raises(DatasetError, match="refusing to load global"):
        cifar.load_batch(io.BytesIO(payload), "data_batch_1", "x.tar.gz")
