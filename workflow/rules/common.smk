# Composes the Hydra config once, expands the grid and names every path the rules share.
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from mptbench.config import (
    Cell,
    RUN_LOG,
    RUN_RECORD,
    ConfigError,
    archive_name,
    compose_config,
    dataset_key,
    expand_devices,
    grid,
    run_config,
)
from mptbench.download import is_remote


envvars:
    "PATH",


# Rules run `python`: the interpreter that runs Snakemake, whether or not its venv is active.
os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
)

try:
    CFG = compose_config(
        Path(workflow.basedir) / "conf",
        config.get("experiment"),
        config.get("overrides"),
    )
    DEVICES = expand_devices(CFG)
except ConfigError as exc:
    raise WorkflowError(f"mptbench config: {exc}") from None

# What the tracking store needs in every job's environment (remote executors too).
workflow.register_envvars(*CFG["tracking"]["env"])
EXPERIMENT = CFG["name"]
DATASET = CFG["dataset"]
CELLS = grid(CFG, DEVICES)
CELL_BY_WILDCARDS = {
    tuple(str(v) for v in cell.wildcards(EXPERIMENT).values()): cell for cell in CELLS
}
ARCHIVE = f"resources/downloads/{archive_name(DATASET)}"
PREPARED = f"resources/tfds/{dataset_key(DATASET)}.json"
TRACKING = f"results/{EXPERIMENT}/mlflow_experiment.json"
REPORT = {
    "summary": f"results/{EXPERIMENT}/report/summary.csv",
    "html": f"results/{EXPERIMENT}/report/index.html",
    "plots": [
        f"results/{EXPERIMENT}/report/ms_per_step.png",
        f"results/{EXPERIMENT}/report/published_ms_per_step.png",
    ],
}
RECORDS = [RUN_RECORD.format(**cell.wildcards(EXPERIMENT)) for cell in CELLS]
CALIBRATION = "results/calibration/{variant}/{device}.json"
VARIANT_ENV = "resources/envs/{variant}.json"
PROBE = "results/{experiment}/probes/{variant}/{device}/{policy}.json"
WHEEL_MANIFEST = "resources/wheels/{variant}.json"
CALIBRATIONS = sorted(
    {CALIBRATION.format(variant=cell.variant, device=cell.device) for cell in CELLS}
)

# Timing jobs never share a device: each device is a resource of capacity 1 (unless the
# command line or a profile sets it), and a CPU cell also takes every core Snakemake has.
for _device in DEVICES:
    if f"timing_{_device}" not in workflow.global_resources:
        workflow.register_resource(f"timing_{_device}", 1)


wildcard_constraints:
    variant=r"[A-Za-z0-9_]+",
    device=r"cpu|gpu\d+",
    policy=r"[A-Za-z0-9_]+",
    batch_size=r"\d+",


def cell_of(wildcards):
    key = (
        wildcards.experiment,
        wildcards.variant,
        wildcards.device,
        wildcards.policy,
        wildcards.batch_size,
    )
    if key not in CELL_BY_WILDCARDS:
        raise WorkflowError(f"{'/'.join(key)} is not a cell of experiment {EXPERIMENT}")
    return CELL_BY_WILDCARDS[key]


def train_run_json(wildcards):
    return json.dumps(run_config(CFG, cell_of(wildcards)), sort_keys=True)


def variant_json(wildcards):
    return json.dumps({"name": wildcards.variant, **CFG["variant"][wildcards.variant]})


def calibrate_settings_json(wildcards):
    return json.dumps(_device_settings(wildcards)["calibrate"])


def train_threads(wildcards):
    if wildcards.device != "cpu":
        return CFG["device"]["gpu"]["threads"]
    try:
        return workflow.cores
    except WorkflowError:  # no --cores (e.g. a cluster run): the profile sets threads
        return 1


def _device_settings(wildcards):
    return CFG["device"]["cpu" if wildcards.device == "cpu" else "gpu"]


def train_mem_mb(wildcards):
    return _device_settings(wildcards)["mem_mb"]


def train_runtime(wildcards):
    return _device_settings(wildcards)["runtime_min"]


def train_gpus(wildcards):
    return 0 if wildcards.device == "cpu" else 1


def _timing_slot(device):
    return lambda wildcards: int(wildcards.device == device)


# One resource per device: resources: **TIMING_SLOTS in the train rule.
TIMING_SLOTS = {f"timing_{device}": _timing_slot(device) for device in DEVICES}


def local_inputs(*sources):
    """Local paths among a dataset's sources: inputs, so a rule can produce them first."""
    return [
        str(s)
        for s in sources
        if s and not is_remote(str(s)) and not str(s).startswith("file:")
    ]


def output_dir(wildcards, output):
    """The folder of a rule's first output (a param derived from it, not a second literal)."""
    return str(Path(output[0]).parent)


def fixture_options(wildcards):
    return json.dumps(DATASET.get("fixture") or {})


def variant_of(wildcards):
    if wildcards.variant not in CFG["variant"]:
        raise WorkflowError(f"variant {wildcards.variant} is not in this experiment")
    return CFG["variant"][wildcards.variant]


def built_wheel(wildcards):
    """The build rule's manifest, for a variant that builds its wheel and was given none."""
    variant = variant_of(wildcards)
    if variant["build"] and not variant["wheel"]:
        return WHEEL_MANIFEST.format(variant=wildcards.variant)
    return []


def build_setting(key):
    return lambda wildcards: variant_of(wildcards)["build"][key]


def build_copts(wildcards):
    return " ".join(f"--copt={c}" for c in variant_of(wildcards)["build"]["copts"])


def build_resource(key, default):
    return lambda wildcards: (variant_of(wildcards)["build"] or {}).get(key, default)


def wheel_manifest_path(wildcards, input):
    return input.wheel or ""


def probe_of_cell(wildcards):
    """The probe a cell predicts its step time from, when a step-time limit is set."""
    if not CFG["train"]["max_step_seconds"]:
        return []
    return PROBE.format(
        **{k: wildcards[k] for k in ("experiment", "variant", "device", "policy")}
    )


def probe_run_json(wildcards):
    cell = Cell(
        wildcards.variant,
        wildcards.device,
        wildcards.policy,
        CFG["train"]["probe_batch_size"],
    )
    return json.dumps(run_config(CFG, cell), sort_keys=True)
