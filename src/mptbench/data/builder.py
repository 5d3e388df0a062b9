"""One tensorflow-datasets builder for every archive the project reads.

A dataset kind (imagenette, cifar10) is a `DatasetSpec`: its classes, how its images are
encoded in the cache, which archive folder each split comes from, and a generator of examples
from the archive's members. `builder_for` turns a spec into a tfds builder whose cache is
keyed by dataset name, builder version and image size.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

# Each kind's module defines SPEC; the prepared cache names its builder (e.g.
# "mptbench_imagenette"), so both names lead to the same kind.
KINDS = {
    "imagenette": "mptbench.data.imagenette",
    "cifar10": "mptbench.data.cifar10",
    "image_folder": "mptbench.data.image_folder",
}


class DatasetError(RuntimeError):
    """The archive cannot be turned into a dataset; the message names the file."""


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    kind: str
    version: str
    release_notes: str
    homepage: str
    # The classes; None where the source says (classes_of(source) finds them).
    class_names: tuple[str, ...] | None
    encoding: str  # how the cache stores images: "jpeg" or "png"
    splits: dict[str, Any]  # tfds split -> what `examples` needs to find it in the archive
    # examples(config, members, split_source) -> (key, {"image", "label", "file_name"}) pairs;
    # members are the archive's, or None for a source that is a folder (from_archive False).
    examples: Callable[[Any, Iterator | None, Any], Iterator]
    from_archive: bool = True
    classes_of: Callable[[str], tuple[str, ...]] | None = None

    def classes(self, source) -> tuple[str, ...]:
        return self.class_names or tuple(self.classes_of(str(source)))

    @property
    def builder_name(self) -> str:
        return f"mptbench_{self.kind}"


def tfds_offline():
    """tensorflow_datasets, with its Google Cloud Storage look-ups turned off."""
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core.utils import gcs_utils

    gcs_utils._is_gcs_disabled = True
    return tfds


def spec_of(kind: str) -> DatasetSpec:
    name = kind.removeprefix("mptbench_")
    if name not in KINDS:
        raise DatasetError(f"unknown dataset builder {kind!r} (allowed: {', '.join(KINDS)})")
    return importlib.import_module(KINDS[name]).SPEC


def config_name(dataset_name: str, image_size: int) -> str:
    return re.sub(r"[^a-z0-9_]", "_", f"{dataset_name}_{image_size}px".lower())


@cache
def _builder_class(kind: str):
    """The tfds classes for a kind, made once (importing tfds costs seconds)."""
    tfds = tfds_offline()
    spec = spec_of(kind)

    @dataclasses.dataclass
    class ArchiveConfig(tfds.core.BuilderConfig):
        archive: str = ""
        image_size: int = 256
        threads: int = 1
        class_names: tuple = ()

    class ArchiveBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        VERSION = tfds.core.Version(spec.version)
        RELEASE_NOTES = {spec.version: spec.release_notes}
        BUILDER_CONFIGS = []
        name = spec.builder_name

        def _info(self):
            size = self.builder_config.image_size
            image = tfds.features.Image(shape=(size, size, 3), encoding_format=spec.encoding)
            features = {
                "image": image,
                "label": tfds.features.ClassLabel(names=list(self.builder_config.class_names)),
                "file_name": tfds.features.Text(),
            }
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict(features),
                supervised_keys=("image", "label"),
                homepage=spec.homepage,
            )

        def _split_generators(self, dl_manager):
            archive = self.builder_config.archive

            def members():
                return dl_manager.iter_archive(archive) if spec.from_archive else None

            return {
                split: self._generate_examples(members(), source)
                for split, source in spec.splits.items()
            }

        def _generate_examples(self, members, source):
            return spec.examples(self.builder_config, members, source)

    return ArchiveConfig, ArchiveBuilder


def builder_for(
    kind: str, archive, dataset_name: str, image_size: int, data_dir, threads=None, classes=()
):
    """A tfds builder of this kind for one dataset name and image size (and, for a source
    that names its own classes, those classes)."""
    spec = spec_of(kind)
    config_cls, builder_cls = _builder_class(spec.kind)
    config = config_cls(
        name=config_name(dataset_name, image_size),
        description=f"{dataset_name} at {image_size}x{image_size}",
        archive=str(archive),
        image_size=image_size,
        threads=threads or os.cpu_count() or 1,
        class_names=tuple(spec.class_names or classes),
    )
    return builder_cls(config=config, data_dir=str(data_dir))
