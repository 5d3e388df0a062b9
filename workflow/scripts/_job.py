"""What every rule's script does around its work: output to the rule's log, and a failure a
user must fix as one `error:` line (the log's last), then exit 1. This checkout's mptbench is
first on the path from the Snakefile's PYTHONPATH (workflow/rules/common.smk)."""

import os
import sys


def run(snakemake, work, errors: tuple[type[BaseException], ...] = ()) -> None:
    """Call `work()` with this process's (and its children's) output in the rule's log."""
    if snakemake.log:
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(str(snakemake.log[0]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
    try:
        code = work()
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(code or 0)
