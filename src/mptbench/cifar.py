"""CIFAR-10 from the python pickle tarball: a fixture writer and the project's tfds builder."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import os
import pickle
import tarfile
from pathlib import Path

from mptbench.dataset import DatasetError, _tfds, config_name

CIFAR10_CLASSES = tuple("airplane automobile bird cat deer dog frog horse ship truck".split())
TOP = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
SPLITS = {"train": TRAIN_BATCHES, "validation": ("test_batch",)}
SIDE = 32
# Scrambled, with batches.meta after some batches: the builder must rely on no member order.
MEMBER_ORDER = tuple(
    "data_batch_4 readme.html test_batch data_batch_3 batches.meta data_batch_2 data_batch_5"
    " data_batch_1".split()
)
README_HTML = b"<html><body><p>CIFAR-10 python version (mptbench fixture).</p></body></html>\n"

# What the real pickles (Python 2 numpy arrays) and the fixture's (Python 3, protocol 2, which
# stores bytes via _codecs.encode) reference. Anything else is refused: unpickling can run code.
_SAFE_GLOBALS = {
    ("_codecs", "encode"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
}


class _BatchUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        # numpy 2 renamed numpy.core (which the original pickles name) to numpy._core.
        if module.startswith("numpy.core"):
            module = "numpy._core" + module[len("numpy.core") :]
        if (module, name) not in _SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")
        return super().find_class(module, name)


def load_batch(fobj, member: str, archive: str) -> dict:
    """One unpickled batch (bytes keys, as pickle.load(f, encoding="bytes") gives)."""
    try:
        return _BatchUnpickler(fobj, encoding="bytes").load()
    except Exception as exc:  # garbage bytes raise almost any exception type while unpickling
        raise DatasetError(f"cannot unpickle {member} in {archive}: {exc!r}") from None


def _images(rng, class_index: int, count: int):
    """Rows of 3072 bytes (R plane, G plane, B plane) whose colour depends on the class."""
    import numpy as np

    hue = (class_index * 25) % 256
    base = np.array([hue, 255 - hue, (hue * 7) % 256], dtype=np.int16)
    noise = rng.integers(-40, 41, size=(count, SIDE, SIDE, 3), dtype=np.int16)
    hwc = np.clip(base + noise, 0, 255).astype(np.uint8)
    return hwc.transpose(0, 3, 1, 2).reshape(count, 3 * SIDE * SIDE)


def _batch_bytes(label: str, labels, data, filenames) -> bytes:
    batch = {
        b"batch_label": label.encode(),
        b"labels": [int(x) for x in labels],
        b"data": data,
        b"filenames": list(filenames),
    }
    return pickle.dumps(batch, protocol=2)


def _add(tar: tarfile.TarFile, name: str, data: bytes | None) -> None:
    info = tarfile.TarInfo(name)
    info.mtime, info.uname, info.gname = 0, "root", "root"
    if data is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        return
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


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
    import numpy as np

    if corrupt_batch is not None and corrupt_batch not in MEMBER_ORDER:
        raise ValueError(f"corrupt_batch={corrupt_batch!r} is not a member of this archive")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    members = {}
    for split, per_class in (("train", train_per_class), ("test", test_per_class)):
        labels = np.repeat(np.arange(len(CIFAR10_CLASSES)), per_class)
        rng.shuffle(labels)  # the real batches mix the classes
        data = np.empty((len(labels), 3 * SIDE * SIDE), dtype=np.uint8)
        for c in range(len(CIFAR10_CLASSES)):
            data[labels == c] = _images(rng, c, int((labels == c).sum()))
        names = [f"{CIFAR10_CLASSES[c]}_s_{i:06d}.png".encode() for i, c in enumerate(labels)]
        if split == "test":
            members["test_batch"] = _batch_bytes("testing batch 1 of 1", labels, data, names)
            continue
        for i, idx in enumerate(np.array_split(np.arange(len(labels)), len(TRAIN_BATCHES))):
            members[TRAIN_BATCHES[i]] = _batch_bytes(
                f"training batch {i + 1} of 5", labels[idx], data[idx], [names[j] for j in idx]
            )
    meta = {
        b"num_cases_per_batch": -(-train_per_class * len(CIFAR10_CLASSES) // len(TRAIN_BATCHES)),
        b"label_names": [name.encode() for name in CIFAR10_CLASSES],
        b"num_vis": 3 * SIDE * SIDE,
    }
    members["batches.meta"] = pickle.dumps(meta, protocol=2)
    members["readme.html"] = README_HTML
    if corrupt_batch is not None:
        members[corrupt_batch] = b"\x80\x02 this is not a pickle \xff\x00" * 16
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                _add(tar, f"{TOP}/", None)
                for name in MEMBER_ORDER:
                    _add(tar, f"{TOP}/{name}", members[name])
    os.replace(tmp, path)
    return {
        "path": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "train": train_per_class * len(CIFAR10_CLASSES),
        "validation": test_per_class * len(CIFAR10_CLASSES),
    }


def _check_label_names(meta: dict, archive: str) -> None:
    raw = meta.get(b"label_names", []) if isinstance(meta, dict) else []
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in raw]
    if tuple(names) != CIFAR10_CLASSES:
        raise DatasetError(
            f"{archive}: batches.meta has label_names {names}, "
            f"not CIFAR-10's {list(CIFAR10_CLASSES)}"
        )


def _examples(batch: dict, member: str, archive: str, image_size: int):
    """(key, example) for every image of one unpickled batch."""
    import numpy as np
    from PIL import Image

    try:
        data, labels, names = batch[b"data"], batch[b"labels"], batch[b"filenames"]
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"{member} in {archive} lacks {exc}") from None
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * SIDE * SIDE:
        raise DatasetError(f"{member} in {archive}: data is {data.dtype} {data.shape}")
    if not len(labels) == len(names) == len(data):
        raise DatasetError(f"{member} in {archive}: {len(data)} images, {len(labels)} labels")
    for i, (row, label, name) in enumerate(zip(data, labels, names, strict=True)):
        if not 0 <= int(label) < len(CIFAR10_CLASSES):
            raise DatasetError(f"{member} in {archive}: image {i} has label {label}")
        img = Image.fromarray(np.ascontiguousarray(row.reshape(3, SIDE, SIDE).transpose(1, 2, 0)))
        if image_size != SIDE:
            img = img.resize((image_size, image_size), Image.Resampling.BILINEAR)
        # tfds encodes a PIL image losslessly as png: the 32px originals stay bit-exact.
        yield (
            f"{member}/{i:05d}",
            {
                "image": img,
                "label": int(label),
                "file_name": name.decode() if isinstance(name, bytes) else str(name),
            },
        )


def _make_builder_class():
    tfds = _tfds()

    @dataclasses.dataclass
    class Cifar10Config(tfds.core.BuilderConfig):
        archive: str = ""
        image_size: int = SIDE

    class MptbenchCifar10(tfds.core.GeneratorBasedBuilder):
        """CIFAR-10 from a local, already verified cifar-10-python.tar.gz."""

        VERSION = tfds.core.Version("1.0.0")
        RELEASE_NOTES = {"1.0.0": "PNG images; train = data_batch_1..5, validation = test_batch."}
        BUILDER_CONFIGS = []

        def _info(self):
            size = self.builder_config.image_size
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict(
                    {
                        "image": tfds.features.Image(shape=(size, size, 3), encoding_format="png"),
                        "label": tfds.features.ClassLabel(names=list(CIFAR10_CLASSES)),
                        "file_name": tfds.features.Text(),
                    }
                ),
                supervised_keys=("image", "label"),
                homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
            )

        def _split_generators(self, dl_manager):
            archive = self.builder_config.archive
            return {
                split: self._generate_examples(dl_manager.iter_archive(archive), batches)
                for split, batches in SPLITS.items()
            }

        def _generate_examples(self, members, batches):
            archive, size = self.builder_config.archive, self.builder_config.image_size
            seen, meta_checked = set(), False
            for path, fobj in members:
                parts = path.replace("\\", "/").split("/")
                if len(parts) < 2 or parts[-2] != TOP:
                    continue
                if parts[-1] == "batches.meta":
                    _check_label_names(load_batch(fobj, path, archive), archive)
                    meta_checked = True
                elif parts[-1] in batches:
                    seen.add(parts[-1])
                    yield from _examples(load_batch(fobj, path, archive), path, archive, size)
            missing = [b for b in batches if b not in seen]
            if missing or not meta_checked:
                lacking = missing + ([] if meta_checked else ["batches.meta"])
                raise DatasetError(f"{archive} lacks {', '.join(lacking)} under {TOP}/")

    return Cifar10Config, MptbenchCifar10


_BUILDER = None


def cifar10_builder(archive: str | Path, dataset_name: str, image_size: int, data_dir: str | Path):
    global _BUILDER
    if _BUILDER is None:
        _BUILDER = _make_builder_class()
    config_cls, builder_cls = _BUILDER
    config = config_cls(
        name=config_name(dataset_name, image_size),
        description=f"{dataset_name} at {image_size}x{image_size}",
        archive=str(archive),
        image_size=image_size,
    )
    return builder_cls(config=config, data_dir=str(data_dir))
