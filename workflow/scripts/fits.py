"""Search the largest batch one policy's cells fit at on their device; each try's peak memory."""

from _job import run

from mptbench.core import hardware
from mptbench.core.contract import ProbeResult, Run, decode
from mptbench.core.files import read_json
from mptbench.jobs.environment import interpreter
from mptbench.jobs.fits import what_fits


def work():
    python, installed = interpreter(snakemake.input.env)
    probe = [decode(ProbeResult, read_json(p)) for p in snakemake.input.probe]
    settings = snakemake.params.settings
    hardware.require_same(
        snakemake.wildcards.device, {"its probe": probe[0].hardware if probe else None}
    )
    what_fits(
        python, decode(Run, snakemake.params.run).installed(installed), snakemake.input.prepared,
        snakemake.output[0], settings["batch_sizes"], settings["cap"], settings["steps"],
        settings["limit_mb"], probe[0] if probe else None,
    )


run(snakemake, work, (hardware.Mismatch,))
