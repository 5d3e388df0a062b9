"""Archives in the real datasets' exact layouts, made locally: for the offline smoke run, the
tests and the benchmarks.

    imagenette2-320/noisy_imagenette.csv
    imagenette2-320/train/<wnid>/<wnid>_<n>.JPEG
    imagenette2-320/val/<wnid>/ILSVRC2012_val_<n>.JPEG

    cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta,readme.html}

The same arguments give the same bytes (fixed seeds, tar and gzip mtimes), so a fixture's
sha256 is stable. Like the real Imagenette archive it holds one grayscale and one CMYK JPEG.
"""

from __future__ import annotations

import io
import pickle
import random
from pathlib import Path

from mptbench.core.files import sha256_of
from mptbench.data.archive import TarGzWriter
from mptbench.data.cifar10 import CIFAR10_CLASSES, SIDE, TOP, TRAIN_BATCHES
from mptbench.data.imagenette import WNIDS

NOISY_HEADER = (
    "path,noisy_labels_0,noisy_labels_1,noisy_labels_5,noisy_labels_25,noisy_labels_50,is_valid"
)
# Scrambled, with batches.meta after some batches: the builder must rely on no member order.
CIFAR_MEMBER_ORDER = tuple(
    "data_batch_4 readme.html test_batch data_batch_3 batches.meta data_batch_2 data_batch_5"
    " data_batch_1".split()
)
CIFAR_README = b"<html><body><p>CIFAR-10 python version (mptbench fixture).</p></body></html>\n"


def class_colour(class_index: int) -> tuple[int, int, int]:
    """A colour per class, so a model can learn something from fixture images."""
    hue = (class_index * 25) % 256
    return hue, 255 - hue, (hue * 7) % 256


def _jpeg(rng: random.Random, class_index: int, short_side: int, mode: str) -> bytes:
    from PIL import Image, ImageDraw

    long_side = short_side * rng.choice((4, 5)) // 3
    size = (long_side, short_side) if rng.random() < 0.7 else (short_side, long_side)
    base = class_colour(class_index)
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


def _imagenette_members(rng, train_per_class: int, val_per_class: int):
    members, counter = [], 10000
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        for class_index, wnid in enumerate(WNIDS):
            for _ in range(per_class):
                counter += rng.randint(1, 40)
                stem = f"{wnid}_{counter}" if split == "train" else f"ILSVRC2012_val_{counter:08d}"
                members.append((f"{split}/{wnid}/{stem}.JPEG", class_index, split))
    return members


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
    rng = random.Random(seed)
    members = _imagenette_members(rng, train_per_class, val_per_class)
    if corrupt is not None and corrupt not in {m for m, _, _ in members}:
        raise ValueError(f"corrupt={corrupt!r} is not a member of this archive")
    if len(members) < 3:
        raise ValueError("an archive needs at least 3 images (one grayscale, one CMYK)")
    modes = {members[0][0]: "L", members[1][0]: "CMYK"}
    noisy_rows = []
    with TarGzWriter(path) as tar:
        for member, class_index, split in members:
            if member == corrupt:
                data = b"\xff\xd8\xff\xe0 this is not a JPEG " * 8
            else:
                data = _jpeg(rng, class_index, short_side, modes.get(member, "RGB"))
            tar.add_file(f"{top}/{member}", data)
            wnid, valid = member.split("/")[1], "True" if split == "val" else "False"
            noisy_rows.append(f"{member},{wnid},{wnid},{wnid},{wnid},{wnid},{valid}")
        csv = "\n".join([NOISY_HEADER, *noisy_rows]) + "\n"
        tar.add_file(f"{top}/noisy_imagenette.csv", csv.encode())
    return {
        "path": str(path),
        "sha256": sha256_of(path),
        "train": train_per_class * len(WNIDS),
        "validation": val_per_class * len(WNIDS),
    }


def _cifar_images(rng, class_index: int, count: int):
    """Rows of 3072 bytes (R plane, G plane, B plane) whose colour depends on the class."""
    import numpy as np

    base = np.array(class_colour(class_index), dtype=np.int16)
    noise = rng.integers(-40, 41, size=(count, SIDE, SIDE, 3), dtype=np.int16)
    hwc = np.clip(base + noise, 0, 255).astype(np.uint8)
    return hwc.transpose(0, 3, 1, 2).reshape(count, 3 * SIDE * SIDE)


def _cifar_batch(label: str, labels, data, filenames) -> bytes:
    batch = {
        b"batch_label": label.encode(),
        b"labels": [int(x) for x in labels],
        b"data": data,
        b"filenames": list(filenames),
    }
    return pickle.dumps(batch, protocol=2)


def _cifar_split(rng, per_class: int):
    import numpy as np

    labels = np.repeat(np.arange(len(CIFAR10_CLASSES)), per_class)
    rng.shuffle(labels)  # the real batches mix the classes
    data = np.empty((len(labels), 3 * SIDE * SIDE), dtype=np.uint8)
    for c in range(len(CIFAR10_CLASSES)):
        data[labels == c] = _cifar_images(rng, c, int((labels == c).sum()))
    names = [f"{CIFAR10_CLASSES[c]}_s_{i:06d}.png".encode() for i, c in enumerate(labels)]
    return labels, data, names


def _cifar_members(train_per_class: int, test_per_class: int, seed: int) -> dict[str, bytes]:
    import numpy as np

    rng = np.random.default_rng(seed)
    members = {}
    labels, data, names = _cifar_split(rng, train_per_class)
    for i, idx in enumerate(np.array_split(np.arange(len(labels)), len(TRAIN_BATCHES))):
        members[TRAIN_BATCHES[i]] = _cifar_batch(
            f"training batch {i + 1} of 5", labels[idx], data[idx], [names[j] for j in idx]
        )
    labels, data, names = _cifar_split(rng, test_per_class)
    members["test_batch"] = _cifar_batch("testing batch 1 of 1", labels, data, names)
    meta = {
        b"num_cases_per_batch": -(-train_per_class * len(CIFAR10_CLASSES) // len(TRAIN_BATCHES)),
        b"label_names": [name.encode() for name in CIFAR10_CLASSES],
        b"num_vis": 3 * SIDE * SIDE,
    }
    members["batches.meta"] = pickle.dumps(meta, protocol=2)
    members["readme.html"] = CIFAR_README
    return members


def make_cifar10_archive(
    path: str | Path,
    train_per_class: int = 10,
    test_per_class: int = 4,
    seed: int = 0,
    corrupt_batch: str | None = None,
) -> dict:
    """Write a .tar.gz in the layout of cifar-10-python.tar.gz; return path, sha256 and counts.

    `corrupt_batch` names a member (e.g. "data_batch_3") whose bytes become garbage, to test
    that a bad batch fails the cache build with its name.
    """
    if corrupt_batch is not None and corrupt_batch not in CIFAR_MEMBER_ORDER:
        raise ValueError(f"corrupt_batch={corrupt_batch!r} is not a member of this archive")
    members = _cifar_members(train_per_class, test_per_class, seed)
    if corrupt_batch is not None:
        members[corrupt_batch] = b"\x80\x02 this is not a pickle \xff\x00" * 16
    with TarGzWriter(path) as tar:
        tar.add_dir(f"{TOP}/")
        for name in CIFAR_MEMBER_ORDER:
            tar.add_file(f"{TOP}/{name}", members[name])
    return {
        "path": str(path),
        "sha256": sha256_of(path),
        "train": train_per_class * len(CIFAR10_CLASSES),
        "validation": test_per_class * len(CIFAR10_CLASSES),
    }


MAKERS = {"imagenette": make_imagenette_archive, "cifar10": make_cifar10_archive}
