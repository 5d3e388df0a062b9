"""Set up and verify a TensorFlow variant's environment, or check and collect a source build."""

import sys

import _bootstrap  # noqa: F401

from mptbench.variants import main

sys.exit(main())
