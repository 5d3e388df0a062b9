"""Atomic writes: a file a later job reads is either whole or absent, never half-written."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_json(path: str | Path, data: Any) -> None:
    write_bytes(path, (json.dumps(data, indent=2, default=str) + "\n").encode())


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def sha256_digest(path: str | Path, chunk: int = 1 << 20):
    """A running sha256 of the file, read in chunks (archives and wheels are large); a
    resumed download goes on updating it."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest


def sha256_of(path: str | Path) -> str:
    return sha256_digest(path).hexdigest()
