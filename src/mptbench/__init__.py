"""mptbench: does mixed-precision training speed up this model, hardware and build; and why."""
