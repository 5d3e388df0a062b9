"""Measure a device's matmul and convolution TFLOP/s per dtype (the calibrate rule)."""

import sys

import _bootstrap  # noqa: F401

from mptbench.calibrate import main

sys.exit(main())
