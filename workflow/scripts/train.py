"""Train one grid cell (in a supervised child process) and write its run record."""

import sys

import _bootstrap  # noqa: F401

from mptbench.cell import main

sys.exit(main())
