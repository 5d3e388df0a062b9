"""The tfds cache built from an Imagenette-layout archive."""

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from mptbench.core.files import write_json
from mptbench.data import cache as dataset
from mptbench.data.builder import DatasetError
from mptbench.data.fixtures import make_imagenette_archive

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("archive") / "imagenette2-320.tgz"
    return make_imagenette_archive(path, train_per_class=3, val_per_class=1, short_side=40)


@pytest.fixture(scope="module")
def prepared(archive, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("tfds")
    return dataset.prepare(archive["path"], "imagenette-test", 24, data_dir, log=lambda _: None)


def _files(root):
    return {p: p.stat().st_mtime_ns for p in Path(root).rglob("*") if p.is_file()}


def test_cache_has_real_split_counts_classes_and_square_rgb_images(prepared):
    assert prepared["splits"] == {"train": 30, "validation": 10}
    assert prepared["classes"][0] == "tench" and prepared["classes"][-1] == "parachute"
    _, train = dataset.load(prepared, "train")
    images, labels = zip(*[(x.numpy(), int(y)) for x, y in train], strict=True)
    assert {img.shape for img in images} == {(24, 24, 3)}
    assert {img.dtype for img in images} == {np.dtype("uint8")}
    assert sorted(set(labels)) == list(range(10))
    # Grayscale and CMYK originals became RGB: every image carries colour in 3 channels.
    assert all(img.std() > 0 for img in images)


def test_second_prepare_is_a_no_op(prepared, archive):
    before = _files(prepared["data_dir"])
    again = dataset.prepare(
        archive["path"], "imagenette-test", 24, prepared["data_dir"], log=lambda _: None
    )
    assert again["splits"] == prepared["splits"]
    assert _files(prepared["data_dir"]) == before


def test_a_config_naming_other_classes_stops_before_building(archive, tmp_path):
    with pytest.raises(DatasetError, match="10 classes, but dataset.num_classes is 12"):
        dataset.prepare(archive["path"], "imagenette-test", 24, tmp_path / "tfds",
                        log=lambda _: None, num_classes=12)
    assert not list((tmp_path / "tfds").rglob("*.tfrecord*"))


def test_another_size_builds_a_new_cache_beside_the_old(prepared, archive):
    other = dataset.prepare(
        archive["path"], "imagenette-test", 16, prepared["data_dir"], log=lambda _: None
    )
    assert other["config"] != prepared["config"]
    root = Path(prepared["data_dir"]) / prepared["builder"]
    assert (root / prepared["config"] / prepared["version"] / "dataset_info.json").exists()
    assert (root / other["config"] / other["version"] / "dataset_info.json").exists()
    _, train = dataset.load(other, "train")
    assert next(iter(train))[0].shape == (16, 16, 3)


def test_corrupt_jpeg_fails_with_its_path_and_leaves_no_cache(tmp_path):
    path = tmp_path / "bad.tgz"
    make_imagenette_archive(path, train_per_class=2, val_per_class=1, short_side=40)
    with tarfile.open(path) as tar:
        victim = next(m.name for m in tar.getmembers() if "/train/n03000684/" in m.name)
    make_imagenette_archive(
        path, train_per_class=2, val_per_class=1, short_side=40, corrupt=victim.split("/", 1)[1]
    )
    with pytest.raises(DatasetError) as info:
        dataset.prepare(path, "imagenette-bad", 24, tmp_path / "tfds", log=lambda _: None)
    assert victim in str(info.value)
    # Nothing complete is left where a later run would look for the cache.
    assert not list((tmp_path / "tfds").rglob("dataset_info.json"))


def test_prepare_info_is_json_serialisable(prepared, tmp_path):
    write_json(tmp_path / "info.json", prepared)
    assert json.loads((tmp_path / "info.json").read_text())["splits"]["train"] == 30


def test_an_archive_with_no_images_fails_with_one_line(tmp_path):
    """The right folders and no image in them (an emptied or wrong archive)."""
    archive = tmp_path / "imagenette2-320.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for folder in ("imagenette2-320", "imagenette2-320/train", "imagenette2-320/val"):
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    with pytest.raises(DatasetError) as raised:
        dataset.prepare(archive, "empty", 32, tmp_path / "tfds", log=lambda _: None)
    assert str(raised.value) == (
        f"{archive}: no images for the train split in it (is it the imagenette archive?)"
    )
    assert not list((tmp_path / "tfds").rglob("dataset_info.json"))  # no cache a run would read
