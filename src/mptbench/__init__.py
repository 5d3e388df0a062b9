"""mptbench: does mixed-precision training speed up this model, hardware and build; and why."""

# Every run record carries it: the report says when records of several versions meet.
__version__ = "0.2.0"
