"""A folder of images as a dataset: one subfolder per class of JPEG or PNG files, the layout
most users have (`train/` and `val/` folders of those, when the data is already split).

The cache is built the same way as Imagenette's: every image decoded, converted to RGB,
resized to image_size squared, stored as a JPEG. Without `train/` and `val/`, every tenth
image of each class (by name) is kept for validation, so the split is the same on every
machine. An empty folder, a class without images or an unreadable image fails the build
with one line naming it.
"""

from __future__ import annotations

import io
from pathlib import Path

from mptbench.data.builder import DatasetError, DatasetSpec
from mptbench.data.imagenette import resize_jpeg

EXTENSIONS = (".jpg", ".jpeg", ".png")
VALIDATION_EVERY = 10  # every tenth image of a class, by name, when the folder is not split


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in EXTENSIONS)


def class_names(root: str | Path) -> list[str]:
    """The classes: the subfolders of `train/` when the folder is split, else of the root."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"dataset.path: {root} is not a folder")
    base = root / "train" if (root / "train").is_dir() else root
    classes = sorted(p.name for p in base.iterdir() if p.is_dir())
    if not classes:
        raise DatasetError(f"{base}: no class folders (one subfolder per class of images)")
    for name in classes:
        if not _images(base / name):
            raise DatasetError(f"{base / name}: a class without images ({', '.join(EXTENSIONS)})")
    return classes


def split_files(root: str | Path, split: str) -> list[tuple[Path, int]]:
    """(image, class index) of a split: train/ and val/ when there are, else by name."""
    root, classes = Path(root), class_names(root)
    if (root / "train").is_dir():
        base = root / ("train" if split == "train" else "val")
        if not base.is_dir():
            return []
        return [
            (p, i) for i, c in enumerate(classes) if (base / c).is_dir() for p in _images(base / c)
        ]
    files = []
    for i, name in enumerate(classes):
        for n, path in enumerate(_images(root / name)):
            held_out = n % VALIDATION_EVERY == VALIDATION_EVERY - 1
            if held_out == (split == "validation"):
                files.append((path, i))
    return files


def examples(config, members, split: str):
    """(key, example) for every image of the split; `members` is unused (no archive)."""
    for path, label in split_files(config.archive, split):
        image = resize_jpeg(path.read_bytes(), config.image_size, str(path))
        yield str(path), {"image": io.BytesIO(image), "label": label, "file_name": str(path)}


SPEC = DatasetSpec(
    kind="image_folder",
    version="1.0.0",
    release_notes="Resized RGB JPEGs from a folder of class folders.",
    homepage="",
    class_names=None,
    encoding="jpeg",
    splits={"train": "train", "validation": "validation"},
    examples=examples,
    from_archive=False,
    classes_of=lambda root: tuple(class_names(root)),
)
