"""Does it still learn: a comparison group's policies from one seed and data order, the baseline
from a second seed, their losses compared."""

from _job import run

from mptbench.core import hardware
from mptbench.core.contract import ProbeResult, Run, decode
from mptbench.core.files import read_json
from mptbench.jobs.environment import interpreter
from mptbench.jobs.parity import parity


def work():
    python, installed = interpreter(snakemake.input.env)
    probes = [decode(ProbeResult, read_json(p)) for p in snakemake.input.probes]
    settings = snakemake.params.settings
    hardware.require_same(
        snakemake.wildcards.device, {f"the {p.policy} probe": p.hardware for p in probes}
    )
    parity(
        python, [decode(Run, r).installed(installed) for r in snakemake.params.runs],
        snakemake.input.prepared, snakemake.output[0], settings["steps"], settings["budget_s"],
        {p.policy: p for p in probes}, [read_json(r) for r in snakemake.input.records],
    )


run(snakemake, work, (hardware.Mismatch,))
