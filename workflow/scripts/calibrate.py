"""Measure a device's matmul and convolution TFLOP/s per dtype, in the variant's Python
with the backend's own operations."""

from _job import run

from mptbench.core.contract import Calibrate, VariantConfig, decode
from mptbench.jobs.calibrate import calibrate_variant
from mptbench.jobs.launcher import EngineFailed


def work():
    params = snakemake.params
    calibrate_variant(
        snakemake.wildcards.device, decode(VariantConfig, params.variant),
        decode(Calibrate, params.settings),
        snakemake.input.env, snakemake.output[0], backend=params.backend, tf32=params.tf32,
        model_infos=list(snakemake.input.models), model_batch=params.model_batch,
        machine=snakemake.wildcards.machine,
    )


run(snakemake, work, (EngineFailed,))
