"""Download (or copy) an archive, verify its sha256 and move it into place."""

from _job import run

from mptbench.data.download import DownloadError, fetch, read_checksum


def work():
    params = snakemake.params
    expected = params.sha256 or (read_checksum(params.sha256_url) if params.sha256_url else "")
    fetch(params.url, snakemake.output.archive, expected, log=print)


run(snakemake, work, (DownloadError,))
