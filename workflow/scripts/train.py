"""Train one comparison group (its cells taking turns in supervised child processes) and write
each cell's run record."""

from _job import run

from mptbench.core.contract import Run, decode
from mptbench.jobs.supervisor import supervise


def work():
    return supervise(
        [decode(Run, r) for r in snakemake.params.runs], snakemake.input.prepared,
        snakemake.input.tracking, list(snakemake.output.records), snakemake.input.env,
        probe_files=list(snakemake.input.probes), profile_dirs=list(snakemake.output.profiles),
        log_file=snakemake.log[0], model_info=snakemake.input.model,
        fits_files=list(snakemake.input.fits),
    )


run(snakemake, work)
