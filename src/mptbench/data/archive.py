"""Reproducible .tar.gz archives: the same members give the same bytes (and sha256).

Fixtures, tests and benchmarks write their archives through `TarGzWriter`: gzip and tar
mtimes are 0 and owners root, and the file appears under its name only once complete.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tarfile
from pathlib import Path


class TarGzWriter:
    """`with TarGzWriter(path) as tar: tar.add_file("top/a.txt", b"...")`."""

    def __init__(self, path: str | Path, compresslevel: int = 9):
        self.path = Path(path)
        self.compresslevel = compresslevel
        self._tmp = self.path.with_name(self.path.name + ".part")

    def __enter__(self) -> TarGzWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._raw = open(self._tmp, "wb")  # noqa: SIM115 - closed in __exit__
        self._gz = gzip.GzipFile(
            filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=self.compresslevel
        )
        self._tar = tarfile.open(fileobj=self._gz, mode="w", format=tarfile.USTAR_FORMAT)
        return self

    def _info(self, name: str, mode: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.mtime, info.mode, info.uname, info.gname = 0, mode, "root", "root"
        return info

    def add_file(self, name: str, data: bytes) -> None:
        info = self._info(name, 0o644)
        info.size = len(data)
        self._tar.addfile(info, io.BytesIO(data))

    def add_dir(self, name: str) -> None:
        info = self._info(name, 0o755)
        info.type = tarfile.DIRTYPE
        self._tar.addfile(info)

    def __exit__(self, exc_type, exc, tb) -> bool:
        for stream in (self._tar, self._gz, self._raw):
            with contextlib.suppress(Exception) if exc_type else contextlib.nullcontext():
                stream.close()
        if exc_type is None:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)
        return False
