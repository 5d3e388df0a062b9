"""Time one training step on a few images (per variant, device and policy)."""

from _job import run

from mptbench.core.contract import Run, decode
from mptbench.jobs.supervisor import supervise


def work():
    return supervise(
        [[decode(Run, snakemake.params.run)]], snakemake.input.prepared, None,
        [[snakemake.output[0]]], snakemake.input.env, probe_only=True,
    )


run(snakemake, work)
