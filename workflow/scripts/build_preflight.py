"""Check that a TensorFlow source build can run here; write the bazelisk to run it with."""

from pathlib import Path

from _job import run

from mptbench.jobs.environment import VariantError
from mptbench.jobs.source_build import preflight


def work():
    variant = snakemake.params.variant
    bazelisk = preflight(variant["build"], Path(snakemake.params.tools), variant["name"])
    Path(snakemake.output[0]).write_text(bazelisk)


run(snakemake, work, (VariantError,))
