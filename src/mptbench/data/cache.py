"""The prepared cache: build it once from a verified archive, then read it in train jobs.

tfds writes into a temporary folder and renames it when complete, so a build killed midway
leaves nothing a later run reads. Another image size builds a new cache beside the old one.
"""

from __future__ import annotations

import errno
import hashlib
import time
from pathlib import Path

from mptbench.core.files import sha256_of
from mptbench.data.builder import DatasetError, builder_for, spec_of, tfds_offline


def digest(folder: str | Path) -> str:
    """One sha256 over every file of a cache folder (names and contents): the cache's identity,
    which each run records beside the dataset it read."""
    total = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        total.update(f"{path.relative_to(folder)}\0{sha256_of(path)}\n".encode())
    return total.hexdigest()


def _named(exc: Exception, archive, data_dir, kind: str) -> DatasetError | None:
    """A build failure a user can act on, as one line: a full disk, an archive without
    images (tfds' "No examples were yielded" for a split). None for anything else."""
    if "No space left on device" in str(exc) or getattr(exc, "errno", None) == errno.ENOSPC:
        return DatasetError(
            f"disk full while building the cache in {data_dir}: free space there and rerun "
            "(the partial build is in an incomplete.* folder, which no run reads)"
        )
    if isinstance(exc, AssertionError) and "No examples were yielded" in str(exc):
        split = str(exc).split('split "', 1)[-1].split('"', 1)[0]
        return DatasetError(
            f"{archive}: no images for the {split} split in it (is it the {kind} archive?)"
        )
    return None


def prepare(
    archive: str | Path,
    dataset_name: str,
    image_size: int,
    data_dir: str | Path,
    log=print,
    threads: int | None = None,
    kind: str = "imagenette",
    source: str | None = None,
    num_classes: int | None = None,
) -> dict:
    """Build the cache (a no-op when it exists); return what the train jobs need to read it.

    `source` is where the archive came from (its URL), recorded with the cache's digest.
    `num_classes`, where the config gives it, must be what the archive holds: a model's
    description is counted from the config's (plan/layout.py model_data)."""
    tfds = tfds_offline()
    started = time.monotonic()
    classes = spec_of(kind).classes(archive)
    if num_classes and len(classes) != num_classes:
        raise DatasetError(
            f"{archive}: {len(classes)} classes, but dataset.num_classes is {num_classes}"
        )
    b = builder_for(kind, archive, dataset_name, image_size, data_dir, threads, classes)
    log(f"preparing {b.name}/{b.builder_config.name}/{b.version} in {data_dir}")
    try:
        b.download_and_prepare(
            download_config=tfds.download.DownloadConfig(
                try_download_gcs=False, compute_stats=tfds.download.ComputeStatsMode.SKIP
            )
        )
    except Exception as exc:  # noqa: BLE001 - named below when known, else raised
        named = _named(exc, archive, data_dir, kind)
        if named is None:
            raise
        raise named from None
    counts = {split: int(b.info.splits[split].num_examples) for split in spec_of(kind).splits}
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
        "classes": list(classes),
        "seconds": round(elapsed, 2),
        "source": source or str(archive),
        "digest": digest(b.data_dir),
    }


def folder_of(info: dict) -> Path:
    """Where tfds keeps a prepared cache: <data_dir>/<builder>/<config>/<version>."""
    return Path(info["data_dir"]) / info["builder"] / info["config"] / info["version"]


def verify(info: dict, prepared_file: str | Path) -> None:
    """Fail with one line when the cache is no longer what was built (a shard truncated,
    deleted or edited since): a train job would otherwise read it or die deep in tf.data."""
    if not info.get("digest") or not info.get("data_dir"):
        return  # synthetic data, or a cache recorded before digests
    folder = folder_of(info)
    if not folder.is_dir() or digest(folder) != info["digest"]:
        raise DatasetError(
            f"{folder}: the cache differs from the one built (a shard missing, truncated or "
            f"changed); rebuild it: rm -r {folder} {prepared_file}, then rerun"
        )


def load(info: dict, split: str):
    """The prepared split as a tf.data.Dataset of (uint8 image, label); reads only the cache,
    so the builder needs no archive."""
    b = builder_for(
        info["builder"], "", info["dataset"], info["image_size"], info["data_dir"],
        classes=info["classes"],
    )
    return b, b.as_dataset(split=split, as_supervised=True, shuffle_files=False)
