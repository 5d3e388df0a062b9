"""Archives in Imagenette's exact layout, made locally: for the offline smoke run and the tests.

    imagenette2-320/noisy_imagenette.csv
    imagenette2-320/train/<wnid>/<wnid>_<n>.JPEG
    imagenette2-320/val/<wnid>/ILSVRC2012_val_<n>.JPEG

The same arguments give the same bytes (fixed seeds, tar and gzip mtimes), so a fixture's
sha256 is stable. Like the real archive it holds one grayscale and one CMYK JPEG.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import random
import tarfile
from pathlib import Path

# The 10 Imagenette classes: ImageNet WNIDs and their names, in Imagenette's order.
CLASSES = (
    ("n01440764", "tench"),
    ("n02102040", "English springer"),
    ("n02979186", "cassette player"),
    ("n03000684", "chain saw"),
    ("n03028079", "church"),
    ("n03394916", "French horn"),
    ("n03417042", "garbage truck"),
    ("n03425413", "gas pump"),
    ("n03445777", "golf ball"),
    ("n03888605", "parachute"),
)
WNIDS = tuple(w for w, _ in CLASSES)
NOISY_HEADER = (
    "path,noisy_labels_0,noisy_labels_1,noisy_labels_5,noisy_labels_25,noisy_labels_50,is_valid"
)


def _jpeg(rng: random.Random, class_index: int, short_side: int, mode: str) -> bytes:
    """A small image whose colour depends on its class, so a model can learn something."""
    from PIL import Image, ImageDraw

    long_side = short_side * rng.choice((4, 5)) // 3
    size = (long_side, short_side) if rng.random() < 0.7 else (short_side, long_side)
    hue = (class_index * 25) % 256
    base = (hue, 255 - hue, (hue * 7) % 256)
    img = Image.new("RGB", size, base)
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x0, y0 = rng.randrange(size[0]), rng.randrange(size[1])
        x1, y1 = x0 + rng.randrange(4, size[0] // 2 + 5), y0 + rng.randrange(4, size[1] // 2 + 5)
        shade = tuple(max(0, min(255, c + rng.randint(-60, 60))) for c in base)
        draw.rectangle((x0, y0, x1, y1), fill=shade)
    if mode != "RGB":
        img = img.convert(mode)
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=85)
    return out.getvalue()


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    """A tar member with fixed metadata, so the same bytes give the same archive."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def make_imagenette_archive(
    path: str | Path,
    top: str = "imagenette2-320",
    train_per_class: int = 12,
    val_per_class: int = 4,
    short_side: int = 96,
    seed: int = 0,
    corrupt: str | None = None,
) -> dict:
    """Write a .tgz in Imagenette's layout; return counts and sha256.

    `corrupt` names a member (e.g. "train/n01440764/n01440764_3.JPEG") whose bytes are
    replaced by garbage, to test that a bad image fails the cache build with its path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    noisy_rows, members = [], []
    counter = 10000
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        for class_index, wnid in enumerate(WNIDS):
            for _ in range(per_class):
                counter += rng.randint(1, 40)
                stem = f"{wnid}_{counter}" if split == "train" else f"ILSVRC2012_val_{counter:08d}"
                members.append((f"{split}/{wnid}/{stem}.JPEG", class_index, split))
    if corrupt is not None and corrupt not in {m for m, _, _ in members}:
        raise ValueError(f"corrupt={corrupt!r} is not a member of this archive")
    # The real archive has a few grayscale and CMYK JPEGs; the fixture has one of each.
    if len(members) < 3:
        raise ValueError("an archive needs at least 3 images (one grayscale, one CMYK)")
    modes = {members[0][0]: "L", members[1][0]: "CMYK"}
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for member, class_index, split in members:
                    if member == corrupt:
                        data = b"\xff\xd8\xff\xe0 this is not a JPEG " * 8
                    else:
                        data = _jpeg(rng, class_index, short_side, modes.get(member, "RGB"))
                    add_member(tar, f"{top}/{member}", data)
                    wnid = member.split("/")[1]
                    valid = "True" if split == "val" else "False"
                    noisy_rows.append(f"{member},{wnid},{wnid},{wnid},{wnid},{wnid},{valid}")
                csv = "\n".join([NOISY_HEADER, *noisy_rows]) + "\n"
                add_member(tar, f"{top}/noisy_imagenette.csv", csv.encode())
    os.replace(tmp, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "path": str(path),
        "sha256": digest,
        "train": train_per_class * len(WNIDS),
        "validation": val_per_class * len(WNIDS),
    }
