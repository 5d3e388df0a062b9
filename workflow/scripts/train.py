"""Train one grid cell (in a supervised child process) and write its run record."""

from _job import run

from mptbench.core.jobs import Run, decode
from mptbench.jobs.supervisor import supervise


def work():
    return supervise(
        decode(Run, snakemake.params.run), snakemake.input.prepared, snakemake.input.tracking,
        snakemake.output.record, snakemake.input.env,
        probe_file=str(snakemake.input.probe) or None, profile_dir=snakemake.output.profile,
        log_file=snakemake.log[0], model_info=snakemake.input.model,
    )  # fmt: skip


run(snakemake, work)
