"""Measure a device's matmul and convolution TFLOP/s per dtype, in the variant's Python
with the backend's own operations."""

from _job import run

from mptbench.measure.calibrate import calibrate_variant


def work():
    params = snakemake.params
    return calibrate_variant(
        snakemake.wildcards.device, params.variant, params.settings, snakemake.input.env,
        snakemake.output[0], backend=params.backend, tf32=params.tf32,
    )  # fmt: skip


run(snakemake, work)
