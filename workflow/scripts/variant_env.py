"""Set up and verify a TensorFlow variant's environment; write its manifest."""

from pathlib import Path

from _job import run

from mptbench.core.files import write_json
from mptbench.jobs.environment import VariantError, make_environment
from mptbench.jobs.source_build import built_wheel


def work():
    variant = snakemake.params.variant
    wheel = variant["wheel"] or (
        built_wheel(snakemake.input.wheels) if snakemake.input.wheels else None
    )
    manifest = make_environment(
        variant["name"], variant, wheel and str(wheel), Path(snakemake.params.venvs),
        Path(snakemake.input.requirements),
    )
    write_json(snakemake.output[0], manifest)


run(snakemake, work, (VariantError,))
