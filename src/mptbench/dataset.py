"""The project's tensorflow-datasets builder: Imagenette resized once into TFRecord shards.

Training never decodes the 320px originals: prepare() streams the verified archive (no
extraction), converts every image to RGB (the real archive holds grayscale and CMYK
JPEGs), resizes it to image_size x image_size as the seed did (aspect not kept) and stores
it as a JPEG. tfds writes into a temporary folder and renames it when complete, so a build
killed midway leaves nothing a later run reads. The cache is keyed by dataset name, builder
version and image size: another size builds a new cache beside the old one.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mptbench.fixtures import CLASSES, WNIDS

SPLITS = {"train": "train", "validation": "val"}
JPEG_QUALITY = 95


class DatasetError(RuntimeError):
    """The archive cannot be turned into a dataset; the message names the file."""


def _tfds():
    import tensorflow_datasets as tfds

    # tfds must never reach the network by itself: no Google Cloud Storage look-ups.
    from tensorflow_datasets.core.utils import gcs_utils

    gcs_utils._is_gcs_disabled = True
    return tfds


def config_name(dataset_name: str, image_size: int) -> str:
    return re.sub(r"[^a-z0-9_]", "_", f"{dataset_name}_{image_size}px".lower())


def resize_jpeg(data: bytes, image_size: int, where: str) -> bytes:
    """Decode any JPEG (gray, CMYK, RGB), resize to a square, re-encode as RGB JPEG."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.draft("RGB", (image_size, image_size))  # decode at a reduced scale when possible
            rgb = img.convert("RGB").resize((image_size, image_size), Image.Resampling.BILINEAR)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise DatasetError(f"cannot decode image {where}: {exc}") from None
    out = io.BytesIO()
    rgb.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def _make_builder_class():
    tfds = _tfds()

    @dataclasses.dataclass
    class ImagenetteConfig(tfds.core.BuilderConfig):
        archive: str = ""
        image_size: int = 256
        threads: int = 1

    class MptbenchImagenette(tfds.core.GeneratorBasedBuilder):
        """Imagenette from a local, already verified archive, resized once."""

        VERSION = tfds.core.Version("1.0.0")
        RELEASE_NOTES = {"1.0.0": "Resized RGB JPEGs, train/validation as in the archive."}
        BUILDER_CONFIGS = []

        def _info(self):
            size = self.builder_config.image_size
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict(
                    {
                        "image": tfds.features.Image(shape=(size, size, 3), encoding_format="jpeg"),
                        "label": tfds.features.ClassLabel(names=[name for _, name in CLASSES]),
                        "file_name": tfds.features.Text(),
                    }
                ),
                supervised_keys=("image", "label"),
                homepage="https://github.com/fastai/imagenette",
            )

        def _split_generators(self, dl_manager):
            archive = self.builder_config.archive
            return {
                split: self._generate_examples(dl_manager.iter_archive(archive), folder)
                for split, folder in SPLITS.items()
            }

        def _generate_examples(self, members, folder):
            size, archive = self.builder_config.image_size, self.builder_config.archive

            def wanted():
                for path, fobj in members:
                    parts = path.replace("\\", "/").split("/")
                    if (
                        len(parts) >= 3
                        and parts[-3] == folder
                        and parts[-1].lower().endswith((".jpeg", ".jpg"))
                    ):
                        if parts[-2] not in WNIDS:
                            raise DatasetError(
                                f"{archive}: {path} is in an unknown class folder {parts[-2]}"
                            )
                        yield path, parts[-2], fobj.read()

            def convert(item):
                path, wnid, data = item
                image = resize_jpeg(data, size, f"{path} in {archive}")
                return path, {
                    "image": io.BytesIO(image),
                    "label": WNIDS.index(wnid),
                    "file_name": path,
                }

            # PIL releases the GIL while decoding, resizing and encoding: threads use every core.
            # A bounded window of pending images keeps memory flat on a full-size archive.
            with ThreadPoolExecutor(max_workers=self.builder_config.threads) as pool:
                pending = collections.deque()
                for item in wanted():
                    pending.append(pool.submit(convert, item))
                    if len(pending) >= 256:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()

    return ImagenetteConfig, MptbenchImagenette


_BUILDER = None


def builder(
    archive: str | Path,
    dataset_name: str,
    image_size: int,
    data_dir: str | Path,
    threads: int | None = None,
):
    global _BUILDER
    if _BUILDER is None:
        _BUILDER = _make_builder_class()
    config_cls, builder_cls = _BUILDER
    config = config_cls(
        name=config_name(dataset_name, image_size),
        description=f"{dataset_name} at {image_size}x{image_size}",
        archive=str(archive),
        image_size=image_size,
        threads=threads or os.cpu_count() or 1,
    )
    return builder_cls(config=config, data_dir=str(data_dir))


def _builder_for(kind: str, archive, dataset_name: str, image_size: int, data_dir, threads=None):
    """The project's tfds builder of a kind, and the class names it labels with."""
    if kind in ("cifar10", "mptbench_cifar10"):
        from mptbench.cifar import CIFAR10_CLASSES, cifar10_builder  # cifar builds on this module

        return cifar10_builder(archive, dataset_name, image_size, data_dir), list(CIFAR10_CLASSES)
    if kind in ("imagenette", "mptbench_imagenette"):
        b = builder(archive, dataset_name, image_size, data_dir, threads)
        return b, [name for _, name in CLASSES]
    raise DatasetError(f"unknown dataset builder {kind!r} (allowed: imagenette, cifar10)")


def prepare(
    archive: str | Path,
    dataset_name: str,
    image_size: int,
    data_dir: str | Path,
    log=print,
    threads: int | None = None,
    kind: str = "imagenette",
) -> dict:
    """Build the cache (a no-op when it exists); return what the train jobs need to read it."""
    tfds = _tfds()
    started = time.monotonic()
    b, classes = _builder_for(kind, archive, dataset_name, image_size, data_dir, threads)
    log(f"preparing {b.name}/{b.builder_config.name}/{b.version} in {data_dir}")
    b.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            try_download_gcs=False,
            compute_stats=tfds.download.ComputeStatsMode.SKIP,
        )
    )
    counts = {split: int(b.info.splits[split].num_examples) for split in SPLITS}
    if not counts["train"]:
        raise DatasetError(f"{archive}: no training images found in the archive")
    elapsed = time.monotonic() - started
    total = sum(counts.values())
    log(
        f"prepared {total} images in {elapsed:.1f} s "
        f"({total / max(elapsed, 1e-9):.0f} images/s): {counts}"
    )
    return {
        "dataset": dataset_name,
        "image_size": image_size,
        "data_dir": str(data_dir),
        "builder": b.name,
        "config": b.builder_config.name,
        "version": str(b.version),
        "splits": counts,
        "classes": classes,
        "seconds": round(elapsed, 2),
    }


def load(info: dict, split: str):
    """The prepared split as a tf.data.Dataset of (uint8 image, label); reads only the cache,
    so the builder needs no archive."""
    _tfds()
    kind = info.get("builder", "mptbench_imagenette")
    b, _ = _builder_for(kind, "", info["dataset"], info["image_size"], info["data_dir"])
    return b, b.as_dataset(split=split, as_supervised=True, shuffle_files=False)


def write_json(path: str | Path, data: dict) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
