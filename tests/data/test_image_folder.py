"""A folder of the user's own images as a dataset, through the same cache and input pipeline."""

import io
from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.data import cache
from mptbench.data.builder import DatasetError
from mptbench.data.image_folder import class_names, split_files
from mptbench.plan import ConfigError

pytestmark = pytest.mark.slow


def _image(path: Path, colour, fmt: str) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(buf, format=fmt)
    path.write_bytes(buf.getvalue())


@pytest.fixture
def folder(tmp_path) -> Path:
    """Three classes, JPEG and PNG files mixed, 10 or 12 images each."""
    root = tmp_path / "my_images"
    for i, name in enumerate(("cats", "dogs", "frogs")):
        for n in range(10 + 2 * (i == 2)):
            fmt = "PNG" if n % 2 else "JPEG"
            _image(root / name / f"{n:03d}.{fmt.lower()}", (40 * i, 90, 160), fmt)
    (root / "README.txt").write_text("not a class")
    return root


def test_a_folder_of_class_folders_becomes_a_cache(folder, tmp_path):
    assert class_names(folder) == ["cats", "dogs", "frogs"]
    info = cache.prepare(folder, "my-images", 24, tmp_path / "tfds", log=lambda _: None,
                         kind="image_folder", source=str(folder))
    assert info["classes"] == ["cats", "dogs", "frogs"]
    # Every tenth image of each class (by name) is kept for validation.
    assert info["splits"] == {"train": 9 + 9 + 11, "validation": 3}
    _, train = cache.load(info, "train")
    images = list(train.as_numpy_iterator())
    assert {label for _, label in images} == {0, 1, 2}
    assert all(image.shape == (24, 24, 3) for image, _ in images)
    assert len(info["digest"]) == 64 and info["source"] == str(folder)


def test_train_and_val_folders_are_kept_as_they_are(tmp_path):
    root = tmp_path / "split"
    for split, count in (("train", 4), ("val", 2)):
        for name in ("a", "b"):
            for n in range(count):
                _image(root / split / name / f"{n}.jpg", (10, 20, 30), "JPEG")
    assert class_names(root) == ["a", "b"]
    assert len(split_files(root, "train")) == 8 and len(split_files(root, "validation")) == 4


def test_bad_folders_are_one_line_naming_what_is_wrong(folder, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no class folders"):
        class_names(tmp_path / "empty")
    (folder / "snakes").mkdir()
    with pytest.raises(DatasetError, match=r"snakes: a class without images"):
        class_names(folder)
    (folder / "snakes").rmdir()
    (folder / "dogs" / "004.jpeg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg at all" * 4)
    with pytest.raises(DatasetError) as info:
        cache.prepare(folder, "bad-images", 24, tmp_path / "tfds", log=lambda _: None,
                      kind="image_folder")
    assert "cannot decode image" in str(info.value) and "dogs/004.jpeg" in str(info.value)
    assert "\n" not in str(info.value)


def test_the_config_checks_the_folder_before_any_job(folder, tmp_path):
    cfg = composed(None, "dataset=image_folder", f"dataset.path={folder}")
    assert cfg["dataset"]["builder"] == "image_folder"
    with pytest.raises(ConfigError, match="dataset.path: not set"):
        composed(None, "dataset=image_folder")
    with pytest.raises(ConfigError, match="is not a folder"):
        composed(None, "dataset=image_folder", f"dataset.path={tmp_path}/nope")
