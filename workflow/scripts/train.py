"""Train one series of comparison groups (each group's cells taking turns in supervised child
processes, the groups' processes interleaved) and write each cell's run record."""

from _job import run

from mptbench.core.contract import Run, decode
from mptbench.jobs.supervisor import supervise
from mptbench.plan import layout


def work():
    groups = [[decode(Run, r) for r in group] for group in snakemake.params.runs]
    experiment = groups[0][0].experiment
    # Each cell's record and profile folder, in its group's order: paths made from its cell,
    # which the rule's outputs hold.
    records = [[layout.RUN_RECORD.format(**r.cell.wildcards(experiment)) for r in g]
               for g in groups]
    profiles = [[layout.PROFILE.format(**r.cell.wildcards(experiment)) for r in g]
                for g in groups]
    named = set(snakemake.output.records) | set(snakemake.output.profiles)
    missing = [p for g in records + profiles for p in g if p not in named]
    if missing:
        raise RuntimeError(f"the train rule's outputs do not name {missing[0]}")
    return supervise(
        groups, snakemake.input.prepared, snakemake.input.tracking, records, snakemake.input.env,
        probe_files=list(snakemake.input.probes), profile_dirs=profiles,
        log_file=snakemake.log[0], model_info=snakemake.input.model,
        fits_files=list(snakemake.input.fits), host_reference=snakemake.params.host,
    )


run(snakemake, work)
