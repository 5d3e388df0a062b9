"""mptbench: does mixed-precision training speed up this model on this hardware and build, and why."""
