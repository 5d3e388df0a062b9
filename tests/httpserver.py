"""A threaded loopback HTTP file server for tests, with switches for ranges, cuts and errors."""

from __future__ import annotations

import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it; `path` is the request target (absolute if proxied)."""

    method: str
    path: str
    range: str | None


class _CountedSwitch:
    """A setting that applies to the next `times` requests (None: to every request)."""

    def __init__(self) -> None:
        self.value: int | None = None
        self.times_left: int | None = 0

    def set(self, value: int | None, times: int | None) -> None:
        self.value, self.times_left = value, (times if value is not None else 0)

    def take(self) -> int | None:
        """The value if it applies to this request, counting the request against `times`."""
        if self.value is None or self.times_left == 0:
            return None
        if self.times_left is not None:
            self.times_left -= 1
        return self.value


class _FileHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.close_connection = True
        self.server.files.handle(self)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    files: FileServer


class FileServer:
    """Serves files from `directory` on 127.0.0.1 at a free port; use as a context manager."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.requests: list[RecordedRequest] = []
        self.ignore_range = False
        self.bytes_per_second: float | None = None  # throttle bodies (a slow mirror)
        self._cut = _CountedSwitch()
        self._status = _CountedSwitch()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- switches -------------------------------------------------------------------------

    def cut_after(self, nbytes: int | None, times: int | None = 1) -> None:
        """Close the next `times` responses (None: all) after `nbytes` of body; None turns off."""
        with self._lock:
            self._cut.set(nbytes, times)

    def fail_with(self, status: int | None, times: int | None = None) -> None:
        """Answer the next `times` requests (None: all) with `status`; None turns it off."""
        with self._lock:
            self._status.set(status, times)

    # --- addresses ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, name: str) -> str:
        return f"{self.base_url}/{urllib.parse.quote(name)}"

    def add_file(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> FileServer:
        self._server = _Server(("127.0.0.1", 0), _FileHandler)
        self._server.files = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FileServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # --- serving --------------------------------------------------------------------------

    def _file_for(self, target: str) -> Path | None:
        """The file a request target names; for a proxy-style absolute URL, its last part."""
        parsed = urllib.parse.urlsplit(target)
        name = urllib.parse.unquote(parsed.path)
        name = name.rsplit("/", 1)[-1] if parsed.scheme else name.lstrip("/")
        root = self.dir.resolve()
        path = (root / name).resolve()
        if not name or not path.is_relative_to(root) or not path.is_file():
            return None
        return path

    def handle(self, request: _FileHandler) -> None:
        range_header = request.headers.get("Range")
        with self._lock:
            self.requests.append(RecordedRequest(request.command, request.path, range_header))
            status = self._status.take()
            ignore_range = self.ignore_range
        if status is not None:
            self._send_bytes(request, status, f"status {status} by request\n".encode())
            return
        path = self._file_for(request.path)
        if path is None:
            self._send_bytes(request, 404, b"not found\n")
            return
        data = path.read_bytes()
        start, end = 0, len(data)
        partial = range_header is not None and not ignore_range
        if partial:
            bounds = _parse_range(range_header, len(data))
            if bounds is None:
                request.send_response(416)
                request.send_header("Content-Range", f"bytes */{len(data)}")
                request.send_header("Content-Length", "0")
                request.send_header("Connection", "close")
                request.end_headers()
                return
            start, end = bounds
        body = data[start:end]
        request.send_response(206 if partial else 200)
        request.send_header("Content-Type", "application/octet-stream")
        request.send_header("Content-Length", str(len(body)))
        if partial:
            request.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        request.send_header("Accept-Ranges", "none" if ignore_range else "bytes")
        request.send_header("Connection", "close")
        request.end_headers()
        with self._lock:
            cut = self._cut.take()
        body = body if cut is None else body[:cut]
        rate = self.bytes_per_second
        chunk = 4096
        for i in range(0, len(body), chunk if rate else max(len(body), 1)):
            request.wfile.write(body[i : i + (chunk if rate else len(body))])
            request.wfile.flush()
            if rate:
                time.sleep(chunk / rate)

    @staticmethod
    def _send_bytes(request: _FileHandler, status: int, body: bytes) -> None:
        request.send_response(status)
        request.send_header("Content-Type", "text/plain")
        request.send_header("Content-Length", str(len(body)))
        request.send_header("Connection", "close")
        request.end_headers()
        request.wfile.write(body)


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """`bytes=N-` or `bytes=N-M` as a half-open (start, end); None if unsatisfiable."""
    unit, _, spec = header.partition("=")
    first, _, last = spec.partition("-")
    if unit.strip() != "bytes" or not first.strip().isdigit():
        return None
    start = int(first)
    end = int(last) + 1 if last.strip().isdigit() else size
    end = min(end, size)
    if start >= size or start >= end:
        return None
    return start, end
