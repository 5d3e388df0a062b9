"""Imagenette: JPEGs in <split>/<wnid>/ folders, resized once into the cache.

Training never decodes the 320px originals: the builder streams the verified archive (no
extraction), converts every image to RGB (the real archive holds grayscale and CMYK JPEGs),
resizes it to image_size x image_size as the seed did (aspect not kept) and stores a JPEG.
"""

from __future__ import annotations

import collections
import io
from concurrent.futures import ThreadPoolExecutor

from mptbench.data.builder import DatasetError, DatasetSpec

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
JPEG_QUALITY = 95
PENDING = 256  # images decoded ahead: keeps memory flat on a full-size archive


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


def _members_of(members, folder: str, archive: str):
    """(path, wnid, bytes) of the split folder's JPEGs; an unknown class folder is an error."""
    for path, fobj in members:
        parts = path.replace("\\", "/").split("/")
        if (
            len(parts) < 3
            or parts[-3] != folder
            or not parts[-1].lower().endswith((".jpeg", ".jpg"))
        ):
            continue
        if parts[-2] not in WNIDS:
            raise DatasetError(f"{archive}: {path} is in an unknown class folder {parts[-2]}")
        yield path, parts[-2], fobj.read()


def examples(config, members, folder: str):
    size, archive = config.image_size, config.archive

    def convert(item):
        path, wnid, data = item
        image = resize_jpeg(data, size, f"{path} in {archive}")
        return path, {"image": io.BytesIO(image), "label": WNIDS.index(wnid), "file_name": path}

    # PIL releases the GIL while decoding, resizing and encoding: threads use every core.
    with ThreadPoolExecutor(max_workers=config.threads) as pool:
        pending = collections.deque()
        for item in _members_of(members, folder, archive):
            pending.append(pool.submit(convert, item))
            if len(pending) >= PENDING:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


SPEC = DatasetSpec(
    kind="imagenette",
    version="1.0.0",
    release_notes="Resized RGB JPEGs, train/validation as in the archive.",
    homepage="https://github.com/fastai/imagenette",
    class_names=tuple(name for _, name in CLASSES),
    encoding="jpeg",
    splits={"train": "train", "validation": "val"},
    examples=examples,
)
