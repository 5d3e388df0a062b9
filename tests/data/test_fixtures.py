"""make_imagenette_archive() writes Imagenette's exact layout, reproducibly, with odd JPEGs."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import tarfile
from pathlib import Path

import pytest
from PIL import Image, UnidentifiedImageError

from mptbench.data.fixtures import WNIDS, make_imagenette_archive

TOP = "imagenette2-320"
NOISY_HEADER = (
    "path,noisy_labels_0,noisy_labels_1,noisy_labels_5,noisy_labels_25,noisy_labels_50,is_valid"
)
SMALL = {"train_per_class": 3, "val_per_class": 1, "short_side": 40}


def _members(path: str | Path) -> dict[str, bytes]:
    """Every regular file in the archive, by name."""
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _images(members: dict[str, bytes]) -> dict[str, bytes]:
    return {name: data for name, data in members.items() if not name.endswith(".csv")}


@pytest.fixture(scope="module")
def archive_members(fixture_archive) -> dict[str, bytes]:
    return _members(fixture_archive["path"])


def test_everything_is_under_the_top_folder(archive_members):
    assert archive_members
    assert all(name.startswith(f"{TOP}/") for name in archive_members)


def test_train_and_val_have_the_ten_wnid_folders_with_requested_counts(
    fixture_archive, archive_members
):
    per_folder: dict[tuple[str, str], int] = {}
    for name in _images(archive_members):
        _, split, wnid, _ = name.split("/")
        per_folder[split, wnid] = per_folder.get((split, wnid), 0) + 1

    expected = {("train", w): 3 for w in WNIDS} | {("val", w): 1 for w in WNIDS}
    assert per_folder == expected
    assert fixture_archive["train"] == 3 * len(WNIDS)
    assert fixture_archive["validation"] == len(WNIDS)


def test_image_names_follow_imagenet_conventions(archive_members):
    for name in _images(archive_members):
        _, split, wnid, filename = name.split("/")
        if split == "train":
            assert re.fullmatch(rf"{wnid}_\d+\.JPEG", filename), name
        else:
            assert re.fullmatch(r"ILSVRC2012_val_\d{8}\.JPEG", filename), name


def test_noisy_labels_csv_lists_every_image_once(archive_members):
    text = archive_members[f"{TOP}/noisy_imagenette.csv"].decode()
    header, *_ = text.splitlines()
    assert header == NOISY_HEADER

    rows = list(csv.DictReader(io.StringIO(text)))
    images = {name.removeprefix(f"{TOP}/") for name in _images(archive_members)}
    assert len(rows) == len(images)
    assert {row["path"] for row in rows} == images
    for row in rows:
        split, wnid, _ = row["path"].split("/")
        assert row["noisy_labels_0"] == wnid
        assert row["is_valid"] == ("True" if split == "val" else "False")


def test_archive_holds_grayscale_and_cmyk_jpegs(archive_members):
    modes = set()
    for data in _images(archive_members).values():
        with Image.open(io.BytesIO(data)) as image:
            assert image.format == "JPEG"
            image.load()
            modes.add(image.mode)
    assert {"L", "CMYK", "RGB"} <= modes


def test_same_arguments_give_same_bytes_and_another_seed_does_not(tmp_path, fixture_archive):
    again = make_imagenette_archive(tmp_path / "again.tgz", **SMALL)
    other_seed = make_imagenette_archive(tmp_path / "other.tgz", seed=1, **SMALL)

    assert again["sha256"] == fixture_archive["sha256"]
    assert again["sha256"] == hashlib.sha256(Path(again["path"]).read_bytes()).hexdigest()
    assert other_seed["sha256"] != fixture_archive["sha256"]
    assert not Path(again["path"] + ".part").exists()


def test_corrupt_member_is_not_a_decodable_image(tmp_path, archive_members):
    train_names = sorted(n for n in _images(archive_members) if "/train/" in n)
    victim = train_names[-1].removeprefix(f"{TOP}/")

    result = make_imagenette_archive(tmp_path / "corrupt.tgz", corrupt=victim, **SMALL)
    members = _members(result["path"])

    assert f"{TOP}/{victim}" in members
    with pytest.raises((UnidentifiedImageError, OSError)):
        with Image.open(io.BytesIO(members[f"{TOP}/{victim}"])) as image:
            image.load()
    assert set(members) == set(archive_members)
