"""fetch() and read_checksum() over real HTTP on loopback, from file:// URLs and from paths."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mptbench.data.download import DownloadError, fetch, read_checksum

ARCHIVE_NAME = "imagenette2-320.tgz"
FAST = {"backoff_s": 0.01, "timeout_s": 10.0}
THROTTLED_S = 0.2  # how long a throttled body takes to arrive, at least


@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch):
    """Keep a proxy set in the caller's environment away from the loopback test server."""
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def archive_bytes(fixture_archive) -> bytes:
    return Path(fixture_archive["path"]).read_bytes()


@pytest.fixture
def served_archive(http_server, archive_bytes) -> str:
    """The fixture archive on the test server; returns its URL."""
    http_server.add_file(ARCHIVE_NAME, archive_bytes)
    return http_server.url(ARCHIVE_NAME)


def _part(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def _assert_nothing_left(dest: Path) -> None:
    assert not dest.exists()
    assert not _part(dest).exists()


def test_fetch_over_http_puts_verified_file_in_place(
    tmp_path, served_archive, fixture_archive, archive_bytes, http_server
):
    dest = tmp_path / "out" / ARCHIVE_NAME
    messages: list[str] = []
    # The server sleeps after each 4096-byte chunk: all but the last chunk's take THROTTLED_S.
    chunks = -(-len(archive_bytes) // 4096)
    assert chunks > 1
    http_server.bytes_per_second = (chunks - 1) * 4096 / THROTTLED_S

    before = time.monotonic()
    result = fetch(served_archive, dest, fixture_archive["sha256"], log=messages.append, **FAST)
    wall = time.monotonic() - before

    assert dest.read_bytes() == archive_bytes
    assert not _part(dest).exists()
    assert result["source"] == served_archive
    assert result["path"] == str(dest)
    assert result["sha256"] == fixture_archive["sha256"]
    assert result["bytes"] == len(archive_bytes)
    # The download's own time: at least what the throttled body took, at most the call's.
    assert THROTTLED_S <= result["seconds"] <= wall
    assert [r.range for r in http_server.requests] == [None]
    assert any(fixture_archive["sha256"] in m for m in messages)


def test_fetch_resumes_with_range_after_body_is_cut(
    tmp_path, served_archive, fixture_archive, archive_bytes, http_server
):
    http_server.cut_after(10_000, times=1)
    dest = tmp_path / ARCHIVE_NAME
    messages: list[str] = []

    result = fetch(served_archive, dest, fixture_archive["sha256"], log=messages.append, **FAST)

    assert [r.range for r in http_server.requests] == [None, "bytes=10000-"]
    assert dest.read_bytes() == archive_bytes
    assert result["sha256"] == fixture_archive["sha256"]
    assert not _part(dest).exists()
    assert any("resuming" in m for m in messages)


def test_fetch_restarts_when_server_ignores_range(
    tmp_path, served_archive, fixture_archive, archive_bytes, http_server
):
    http_server.ignore_range = True
    http_server.cut_after(10_000, times=1)
    dest = tmp_path / ARCHIVE_NAME
    messages: list[str] = []

    fetch(served_archive, dest, fixture_archive["sha256"], log=messages.append, **FAST)

    assert [r.range for r in http_server.requests] == [None, "bytes=10000-"]
    assert dest.read_bytes() == archive_bytes
    assert any("restarting" in m for m in messages)


def test_fetch_rejects_wrong_checksum_and_leaves_no_file(tmp_path, served_archive, fixture_archive):
    dest = tmp_path / ARCHIVE_NAME
    wrong = "0" * 64

    with pytest.raises(DownloadError) as caught:
        fetch(served_archive, dest, wrong, log=lambda _: None, **FAST)

    message = str(caught.value)
    assert wrong in message
    assert fixture_archive["sha256"] in message
    assert "re-uploaded" in message  # an Imagenette URL gets the re-upload hint
    assert "\n" not in message
    _assert_nothing_left(dest)


def test_fetch_fails_at_once_on_404(tmp_path, http_server):
    dest = tmp_path / ARCHIVE_NAME

    with pytest.raises(DownloadError, match="404"):
        fetch(http_server.url("missing.tgz"), dest, "0" * 64, log=lambda _: None, **FAST)

    assert len(http_server.requests) == 1
    _assert_nothing_left(dest)


def test_fetch_fails_at_once_on_403(tmp_path, served_archive, fixture_archive, http_server):
    http_server.fail_with(403)
    dest = tmp_path / ARCHIVE_NAME

    with pytest.raises(DownloadError, match="403"):
        fetch(served_archive, dest, fixture_archive["sha256"], log=lambda _: None, **FAST)

    assert len(http_server.requests) == 1
    _assert_nothing_left(dest)


def test_fetch_retries_through_503(
    tmp_path, served_archive, fixture_archive, archive_bytes, http_server
):
    http_server.fail_with(503, times=2)
    dest = tmp_path / ARCHIVE_NAME
    messages: list[str] = []

    fetch(served_archive, dest, fixture_archive["sha256"], log=messages.append, **FAST)

    assert len(http_server.requests) == 3
    assert dest.read_bytes() == archive_bytes
    assert sum("HTTP 503" in m for m in messages) == 2


def test_fetch_gives_up_after_retry_limit_when_every_body_is_cut(
    tmp_path, served_archive, fixture_archive, http_server
):
    http_server.cut_after(1_000, times=None)
    dest = tmp_path / ARCHIVE_NAME

    with pytest.raises(DownloadError) as caught:
        fetch(
            served_archive, dest, fixture_archive["sha256"], log=lambda _: None, retries=2, **FAST
        )

    message = str(caught.value)
    assert "\n" not in message
    assert "3 attempts" in message
    assert len(http_server.requests) == 3
    assert not dest.exists()


def test_later_fetch_resumes_part_left_by_failed_one(
    tmp_path, served_archive, fixture_archive, archive_bytes, http_server
):
    http_server.cut_after(1_000, times=None)
    dest = tmp_path / ARCHIVE_NAME
    with pytest.raises(DownloadError):
        fetch(
            served_archive, dest, fixture_archive["sha256"], log=lambda _: None, retries=1, **FAST
        )
    http_server.cut_after(None)

    fetch(served_archive, dest, fixture_archive["sha256"], log=lambda _: None, **FAST)

    assert http_server.requests[-1].range == "bytes=2000-"
    assert dest.read_bytes() == archive_bytes


def test_fetch_reports_connection_refused(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dest = tmp_path / ARCHIVE_NAME

    with pytest.raises(DownloadError) as caught:
        fetch(
            f"http://127.0.0.1:{port}/{ARCHIVE_NAME}",
            dest,
            "0" * 64,
            log=lambda _: None,
            retries=1,
            **FAST,
        )

    assert "cannot connect" in str(caught.value)
    assert "\n" not in str(caught.value)
    _assert_nothing_left(dest)


@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_fetch_copies_local_source(tmp_path, fixture_archive, archive_bytes, as_url):
    source = Path(fixture_archive["path"]).as_uri() if as_url else fixture_archive["path"]
    dest = tmp_path / "copy" / ARCHIVE_NAME

    result = fetch(source, dest, fixture_archive["sha256"], log=lambda _: None)

    assert dest.read_bytes() == archive_bytes
    assert result["sha256"] == fixture_archive["sha256"]
    assert not _part(dest).exists()
    assert Path(fixture_archive["path"]).exists()  # a copy, not a move


def test_fetch_rejects_non_gzip_file_named_tgz(tmp_path, http_server):
    payload = b"<html>a login page, not an archive</html>\n" * 50
    http_server.add_file("page.html", payload)
    dest = tmp_path / ARCHIVE_NAME

    with pytest.raises(DownloadError, match="not a gzip archive"):
        fetch(
            http_server.url("page.html"),
            dest,
            hashlib.sha256(payload).hexdigest(),
            log=lambda _: None,
            **FAST,
        )

    _assert_nothing_left(dest)


def test_fetch_rejects_missing_local_file(tmp_path):
    dest = tmp_path / ARCHIVE_NAME

    with pytest.raises(DownloadError, match="no such file"):
        fetch(str(tmp_path / "absent.tgz"), dest, "0" * 64, log=lambda _: None)

    _assert_nothing_left(dest)


def test_fetch_refuses_without_checksum(tmp_path, fixture_archive):
    dest = tmp_path / ARCHIVE_NAME

    with pytest.raises(DownloadError, match="no sha256"):
        fetch(fixture_archive["path"], dest, None, log=lambda _: None)

    _assert_nothing_left(dest)


def test_read_checksum_from_url_and_path(tmp_path, http_server):
    digest = hashlib.sha256(b"anything").hexdigest()
    line = f"{digest.upper()}  {ARCHIVE_NAME}\n".encode()
    http_server.add_file(ARCHIVE_NAME + ".sha256", line)
    local = tmp_path / "local.sha256"
    local.write_bytes(line)

    assert read_checksum(http_server.url(ARCHIVE_NAME + ".sha256")) == digest
    assert read_checksum(str(local)) == digest


@pytest.mark.parametrize("content", ["", "not-a-checksum  file.tgz\n", "abc123  file.tgz\n"])
def test_read_checksum_rejects_file_without_checksum(tmp_path, content):
    path = tmp_path / "bad.sha256"
    path.write_text(content)

    with pytest.raises(DownloadError, match="does not start with a sha256"):
        read_checksum(str(path))


def test_read_checksum_reports_missing_sources(tmp_path, http_server):
    with pytest.raises(DownloadError, match="cannot read checksum"):
        read_checksum(http_server.url("missing.sha256"))
    with pytest.raises(DownloadError, match="cannot read checksum"):
        read_checksum(str(tmp_path / "missing.sha256"))


_FETCH_IN_FRESH_PROCESS = """
import json, sys
from mptbench.data.download import fetch
print(json.dumps(fetch(sys.argv[1], sys.argv[2], sys.argv[3], log=lambda _: None, retries=0)))
"""


@pytest.mark.slow  # a fresh Python process
def test_fetch_honours_http_proxy_from_environment(
    tmp_path, served_archive, fixture_archive, archive_bytes, http_server
):
    # A fresh process, as a user sets http_proxy before starting the workflow: urllib reads
    # the proxy variables once, when its default opener is first built.
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "http_proxy")}
    env["http_proxy"] = http_server.base_url
    url = f"http://imagenette.invalid/{ARCHIVE_NAME}"
    dest = tmp_path / ARCHIVE_NAME

    done = subprocess.run(
        [sys.executable, "-c", _FETCH_IN_FRESH_PROCESS, url, str(dest), fixture_archive["sha256"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sha256"] == fixture_archive["sha256"]
    assert dest.read_bytes() == archive_bytes
    assert [r.path for r in http_server.requests] == [url]
