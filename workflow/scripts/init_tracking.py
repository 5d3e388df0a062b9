"""Create the MLflow store and experiment before any train job writes to it."""

from _job import run

from mptbench.core.files import write_json
from mptbench.jobs.tracking import init_experiment


def work():
    tracking = snakemake.params.tracking
    info = init_experiment(
        tracking["uri"], snakemake.params.name, tracking["artifact_root"],
        tracking["system_metrics"],
    )
    print(f"MLflow experiment {info['experiment_name']} ({info['experiment_id']})")
    write_json(snakemake.output[0], info)


run(snakemake, work)
