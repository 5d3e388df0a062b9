"""Download (or copy) an archive, verify its sha256 and move it into place."""

import argparse
import sys

import _bootstrap  # noqa: F401

from mptbench.download import DownloadError, fetch, read_checksum

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--url", required=True, help="http(s) URL, file:// URL or local path")
parser.add_argument("--dest", required=True)
parser.add_argument("--sha256", default="", help="expected sha256 (pinned in conf/dataset)")
parser.add_argument("--sha256-url", default="", help="where to read the sha256 when none is pinned")
args = parser.parse_args()
try:
    expected = args.sha256 or (read_checksum(args.sha256_url) if args.sha256_url else "")
    fetch(args.url, args.dest, expected, log=lambda line: print(line, flush=True))
except DownloadError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(1)
