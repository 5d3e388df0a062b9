"""CIFAR-10 from the python pickle tarball (cifar-10-batches-py/): batches of 32x32 images.

The pickles are read with an unpickler that refuses anything but the numpy arrays they hold,
since unpickling can run code. Images are stored as PNG, so the 32px originals stay bit-exact.
"""

from __future__ import annotations

import pickle

from mptbench.data.builder import DatasetError, DatasetSpec

CIFAR10_CLASSES = tuple("airplane automobile bird cat deer dog frog horse ship truck".split())
TOP = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
SPLITS = {"train": TRAIN_BATCHES, "validation": ("test_batch",)}
SIDE = 32

# What the real pickles (Python 2 numpy arrays) and the fixture's (Python 3, protocol 2, which
# stores bytes via _codecs.encode) reference. Anything else is refused.
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


def _check_label_names(meta: dict, archive: str) -> None:
    raw = meta.get(b"label_names", []) if isinstance(meta, dict) else []
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in raw]
    if tuple(names) != CIFAR10_CLASSES:
        raise DatasetError(
            f"{archive}: batches.meta has label_names {names}, "
            f"not CIFAR-10's {list(CIFAR10_CLASSES)}"
        )


def _checked_arrays(batch: dict, member: str, archive: str):
    import numpy as np

    try:
        data, labels, names = batch[b"data"], batch[b"labels"], batch[b"filenames"]
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"{member} in {archive} lacks {exc}") from None
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * SIDE * SIDE:
        raise DatasetError(f"{member} in {archive}: data is {data.dtype} {data.shape}")
    if not len(labels) == len(names) == len(data):
        raise DatasetError(f"{member} in {archive}: {len(data)} images, {len(labels)} labels")
    return data, labels, names


def _batch_examples(batch: dict, member: str, archive: str, image_size: int):
    """(key, example) for every image of one unpickled batch."""
    import numpy as np
    from PIL import Image

    data, labels, names = _checked_arrays(batch, member, archive)
    for i, (row, label, name) in enumerate(zip(data, labels, names, strict=True)):
        if not 0 <= int(label) < len(CIFAR10_CLASSES):
            raise DatasetError(f"{member} in {archive}: image {i} has label {label}")
        img = Image.fromarray(np.ascontiguousarray(row.reshape(3, SIDE, SIDE).transpose(1, 2, 0)))
        if image_size != SIDE:
            img = img.resize((image_size, image_size), Image.Resampling.BILINEAR)
        file_name = name.decode() if isinstance(name, bytes) else str(name)
        yield f"{member}/{i:05d}", {"image": img, "label": int(label), "file_name": file_name}


def examples(config, members, batches: tuple[str, ...]):
    archive, size = config.archive, config.image_size
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
            yield from _batch_examples(load_batch(fobj, path, archive), path, archive, size)
    lacking = [b for b in batches if b not in seen] + ([] if meta_checked else ["batches.meta"])
    if lacking:
        raise DatasetError(f"{archive} lacks {', '.join(lacking)} under {TOP}/")


SPEC = DatasetSpec(
    kind="cifar10",
    version="1.0.0",
    release_notes="PNG images; train = data_batch_1..5, validation = test_batch.",
    homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
    class_names=CIFAR10_CLASSES,
    encoding="png",
    splits=SPLITS,
    examples=examples,
)
