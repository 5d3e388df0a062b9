"""Aggregate every run record into summary.csv and index.html (tables, diagnosis, plots)."""

import _bootstrap  # noqa: F401

from mptbench.report import main

raise SystemExit(main())
