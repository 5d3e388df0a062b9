"""What every rule's script does around its work: this checkout's mptbench on the path,
output to the rule's log, and a failure a user must fix as one `error:` line (the log's last),
then exit 1. Scripts import this module before mptbench."""

import os
import sys
from pathlib import Path

# First on the path: Snakemake appends its own search paths (this src/ among them) after
# site-packages, where an installed mptbench (editable or not) would otherwise win.
SRC = str(Path(__file__).resolve().parents[2] / "src")
sys.path.insert(0, SRC)


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
