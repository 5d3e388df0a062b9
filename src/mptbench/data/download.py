"""Fetch an archive (http(s) URL, file:// URL or local path), verify its sha256, move it into place.

The bytes go to `<dest>.part` first; only a verified file is renamed to `<dest>`, so a later
run never trusts a partial or corrupt download. An interrupted HTTP transfer resumes with a
Range request (or restarts when the server ignores Range). Proxies come from the environment.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from mptbench.core.files import sha256_digest

CHUNK = 1 << 16  # what reaches the disk before an interruption, at most this much lost
GZIP_MAGIC = b"\x1f\x8b"
REUPLOAD_HINT = (
    "the Imagenette archives were re-uploaded once in 2021, so an old checksum will not match "
    "the current file"
)


class DownloadError(RuntimeError):
    """A download that cannot succeed as configured; the message is one line."""


class _Transient(Exception):
    """A failure worth retrying (connection reset, truncated body, 5xx)."""


def is_remote(source: str) -> bool:
    return urllib.parse.urlparse(str(source)).scheme in ("http", "https")


def local_path(source: str) -> Path:
    parsed = urllib.parse.urlparse(str(source))
    if parsed.scheme == "file":
        return Path(urllib.request.url2pathname(parsed.path))
    return Path(source)


def _human(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


class _Progress:
    """Log lines at most every `every_s` seconds (and at the end): bytes, percent, speed."""

    def __init__(
        self, log: Callable[[str], None], total: int | None, start: int, every_s: float = 5.0
    ):
        self.log, self.total, self.start, self.every_s = log, total, start, every_s
        self.t0 = self.last = time.monotonic()

    def update(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.every_s:
            return
        self.last = now
        rate = (done - self.start) / max(now - self.t0, 1e-9)
        pct = f" ({100 * done / self.total:.1f}%)" if self.total else ""
        total = f" / {_human(self.total)}" if self.total else ""
        self.log(f"  {_human(done)}{total}{pct} at {rate / 1e6:.1f} MB/s")


def _write_stream(stream, part: Path, mode: str, digest, progress: _Progress, done: int) -> int:
    try:
        with open(part, mode) as out:
            while True:
                try:
                    block = stream.read(CHUNK)
                except (http.client.IncompleteRead, ConnectionError, TimeoutError, OSError) as exc:
                    out.flush()
                    raise _Transient(f"connection broke after {_human(done)}: {exc}") from exc
                if not block:
                    break
                out.write(block)
                digest.update(block)
                done += len(block)
                progress.update(done)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DownloadError(
                f"disk full while writing {part} ({_human(done)} written)"
            ) from None
        raise
    return done


def _range_start(response) -> int | None:
    """The first byte a 206 answer holds, from its Content-Range (bytes START-END/TOTAL)."""
    value = response.headers.get("Content-Range", "")
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _fetch_http(url: str, part: Path, log, timeout: float) -> hashlib._Hash:
    """One attempt: resume `part` if it holds bytes, else start afresh. Returns the digest."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "mptbench"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        # A fresh opener reads the *_proxy variables now (urlopen's shared one, on first use only).
        response = urllib.request.build_opener().open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # our part is already whole (or longer than the file)
            return sha256_digest(part)
        if exc.code >= 500 or exc.code == 429:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from None
        raise DownloadError(f"HTTP {exc.code} {exc.reason} for {url}") from None
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Transient(f"cannot connect to {url}: {reason}") from None
    with response:
        length = response.headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else None
        if have and response.status == 206 and _range_start(response) != have:
            raise _Transient(
                f"server sent {response.headers.get('Content-Range')!r} for bytes={have}-"
            )
        if have and response.status == 206:
            digest = sha256_digest(part)
            mode, done = "ab", have
            log(f"resuming {url} at {_human(have)}")
            total = have + length if length is not None else None
        else:
            if have:
                log(f"server ignored the Range request; restarting {url}")
            digest, mode, done, total = hashlib.sha256(), "wb", 0, length
        progress = _Progress(log, total, done)
        done = _write_stream(response, part, mode, digest, progress, done)
        progress.update(done, final=True)
        if total is not None and done < total:
            raise _Transient(f"body ended at {_human(done)} of {_human(total)}")
    return digest


def _copy_local(src: Path, part: Path, log) -> hashlib._Hash:
    if not src.is_file():
        raise DownloadError(f"no such file: {src}")
    total = src.stat().st_size
    log(f"copying {src} ({_human(total)})")
    progress = _Progress(log, total, 0)
    with open(src, "rb") as stream:
        done = _write_stream(stream, part, "wb", hashlib.sha256(), progress, 0)
    progress.update(done, final=True)
    return sha256_digest(part)


def read_checksum(source: str, timeout: float = 60) -> str:
    """The first word of a checksum file (URL or path), as `sha256sum` writes them."""
    try:
        if is_remote(source):
            with urllib.request.build_opener().open(source, timeout=timeout) as response:
                text = response.read(4096).decode("ascii", "replace")
        else:
            text = local_path(source).read_text(encoding="ascii", errors="replace")
    except (OSError, urllib.error.URLError) as exc:
        raise DownloadError(f"cannot read checksum from {source}: {exc}") from None
    word = text.split()[0].lower() if text.split() else ""
    if len(word) != 64 or any(c not in "0123456789abcdef" for c in word):
        raise DownloadError(f"{source} does not start with a sha256 checksum")
    return word


def fetch(
    source: str,
    dest: str | Path,
    sha256: str | None,
    log: Callable[[str], None] = print,
    retries: int = 5,
    backoff_s: float = 1.0,
    timeout_s: float = 60.0,
    expect_gzip: bool | None = None,
) -> dict:
    """Download or copy `source` to `dest`, verified against `sha256`. Returns a summary."""
    dest = Path(dest)
    if not sha256:
        raise DownloadError(f"no sha256 given for {source}: refusing to trust an unverified file")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    started = time.monotonic()
    if is_remote(source):
        log(f"downloading {source} -> {dest}")
        attempt = 0
        while True:
            attempt += 1
            try:
                digest = _fetch_http(source, part, log, timeout_s)
                break
            except _Transient as exc:
                if attempt > retries:
                    tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                    raise DownloadError(f"{source}: {exc} (gave up after {tries})") from None
                wait = backoff_s * 2 ** (attempt - 1)
                log(f"attempt {attempt} failed: {exc}; retrying in {wait:.1f} s")
                time.sleep(wait)
    else:
        digest = _copy_local(local_path(source), part, log)
    actual = digest.hexdigest()
    size = part.stat().st_size
    if actual != sha256:
        part.unlink(missing_ok=True)
        hint = f"; {REUPLOAD_HINT}" if "imagenette" in str(source) else ""
        raise DownloadError(f"sha256 mismatch for {source}: expected {sha256}, got {actual}{hint}")
    if expect_gzip is None:
        expect_gzip = dest.name.endswith((".tgz", ".gz"))
    if expect_gzip:
        with open(part, "rb") as f:
            if f.read(2) != GZIP_MAGIC:
                part.unlink(missing_ok=True)
                raise DownloadError(
                    f"{source} is not a gzip archive (checksum matched the wrong file?)"
                )
    os.replace(part, dest)
    elapsed = time.monotonic() - started
    log(f"verified sha256 {actual}; {_human(size)} in {elapsed:.1f} s -> {dest}")
    return {
        "source": str(source),
        "path": str(dest),
        "sha256": actual,
        "bytes": size,
        "seconds": elapsed,
    }
