# Composes the Hydra config once, expands the grid and names every path the rules share.
import json
import os
import shlex
import sys
from pathlib import Path

SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SRC))

from mptbench.core.cells import BACKENDS, COMPARISON_AXES, GROUP_AXES, PROBE_AXES
from mptbench.core.contract import encode
from mptbench.core.hardware import PATTERN as MACHINE_PATTERN
from mptbench.core.devices import PATTERN as DEVICE_PATTERN, Device
from mptbench.core.links import experiment_link
from mptbench.data.download import is_remote
from mptbench.plan import (
    Cell,
    ConfigError,
    compose_config,
    expand_devices,
    grid,
    left_out,
    machines,
    run_config,
    workflow_overrides,
)
from mptbench.plan import layout
from mptbench.plan.profile import check_profiles
from mptbench.report.merge import folder_files, split as split_include
from mptbench.report.records import ReportError
import snakemake.io as snakemake_io  # `report(` at a line's start would open a directive


envvars:
    "PATH",


# Every job's script runs the interpreter that runs Snakemake, whether or not its venv is
# active (workflow/scripts/_job.py puts this checkout's src/ first on its path).
os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), os.environ["PATH"]]
)

# A cluster profile still holding its placeholders: one line, before the executor's traceback.
_unfilled = check_profiles(sys.argv, Path.cwd())
if _unfilled:
    raise WorkflowError(f"mptbench profile: {_unfilled}")
# --cores 0 would wait forever: every job here needs a core.
if workflow.resource_settings.cores == 0:
    raise WorkflowError(
        "mptbench: --cores 0 leaves no core for any job; give --cores N or --cores all"
    )

try:
    CFG = compose_config(
        Path(workflow.basedir) / "conf",
        config.get("experiment"),
        workflow_overrides(config),
    )
    DEVICES = expand_devices(CFG)
    MACHINES = machines(CFG)
except ConfigError as exc:
    raise WorkflowError(f"mptbench config: {exc}") from None

# What the tracking store needs in every job's environment (remote executors too).
workflow.register_envvars(*CFG["tracking"]["env"])
# ... and the server's credentials, where the user has set them (names only, never values).
workflow.register_envvars(
    *[name for name in CFG["tracking"].get("env_if_set", []) if name in os.environ]
)
EXPERIMENT = CFG["name"]
DATASET = CFG["dataset"]
CELLS = grid(CFG, DEVICES, MACHINES)
# On a cluster, each target's Snakemake resources (sweep.targets): every timing job of a
# target asks for them, so it lands on that target's nodes.
TARGETS = CFG["sweep"].get("targets") or {}
CELL_SET = set(CELLS)
POLICIES = list(CFG["policy"])
# A train job's outputs: each policy's record and profiles in the comparison group.
GROUP_RECORDS = expand(layout.RUN_RECORD, policy=POLICIES, allow_missing=True)
GROUP_PROFILES = expand(layout.PROFILE, policy=POLICIES, allow_missing=True)
ARCHIVE = layout.archive_path(DATASET)
PREPARED = layout.prepared(DATASET)
TRACKING = layout.TRACKING.format(experiment=EXPERIMENT)
REPORT_DIR = layout.REPORT_DIR.format(experiment=EXPERIMENT)
RECORDS = [layout.RUN_RECORD.format(**cell.wildcards(EXPERIMENT)) for cell in CELLS]


def _on(machine, backend, variant, device):
    return [
        c
        for c in CELLS
        if (c.machine, c.backend, c.variant, c.device)
        == (machine, backend, variant, device)
    ]


def models_of(machine, backend, variant, device):
    """The descriptions of the models a backend and variant's cells on a device train."""
    names = {c.model for c in _on(machine, backend, variant, device)}
    return [
        layout.MODEL_INFO.format(
            model=m, key=layout.model_key(CFG["model"][m], DATASET)
        )
        for m in sorted(names)
    ]


def batch_of(machine, backend, variant, device):
    """The largest batch size a backend and variant's cells on a device train at."""
    return max(c.batch_size for c in _on(machine, backend, variant, device))


def calibration_of(machine, backend, variant, device):
    """The calibration a backend and variant's cells on a device are compared with: measured
    with its settings and over its models' own convolutions, on their machine."""
    settings = Device(device).settings(CFG["device"])
    key = layout.calibration_key(
        CFG["variant"][variant],
        settings["calibrate"],
        settings.get("tf32"),
        models=models_of(machine, backend, variant, device),
        batch=batch_of(machine, backend, variant, device),
    )
    return layout.CALIBRATION.format(
        machine=machine, backend=backend, variant=variant, device=device, settings=key
    )


CALIBRATIONS = sorted(
    {
        calibration_of(cell.machine, cell.backend, cell.variant, cell.device)
        for cell in CELLS
    }
)
# Other machines' results in this report (report.include): their files are the aggregate's
# inputs too, so a folder copied in again redoes the report.
try:
    INCLUDED = [
        str(path)
        for folder in split_include(CFG["report"]["include"])[0]
        for paths in folder_files(folder).values()
        for path in paths
    ]
except ReportError as exc:
    raise WorkflowError(f"mptbench config: {exc}") from None
# A backend and variant asked for together but not paired: said once, not an error.
for _note in left_out(CFG):
    print(f"mptbench: {_note}", file=sys.stderr)

# Timing jobs never share a device: each device is a resource of capacity 1 (unless the
# command line or a profile sets it), and a CPU cell also takes every core Snakemake has.
for _device in DEVICES:
    if f"timing_{_device}" not in workflow.global_resources:
        workflow.register_resource(f"timing_{_device}", 1)


wildcard_constraints:
    machine=MACHINE_PATTERN,
    model=r"[A-Za-z0-9_]+",
    backend="|".join(BACKENDS),
    variant=r"[A-Za-z0-9_]+",
    device=DEVICE_PATTERN,
    policy=r"[A-Za-z0-9_]+",
    batch_size=r"\d+",
    settings=r"[0-9a-f]{12}",
    key=r"[0-9a-f]{12}",


def group_of(wildcards):
    """The cells of a comparison group: one per policy, the group's other axes the same."""
    axes = {k: wildcards[k] for k in COMPARISON_AXES}
    cells = [
        Cell(**{**axes, "batch_size": int(axes["batch_size"]), "policy": p})
        for p in POLICIES
    ]
    if not all(cell in CELL_SET for cell in cells):
        raise WorkflowError(
            f"{layout.COMPARISON.format(**axes)} is not a comparison of experiment {EXPERIMENT}"
        )
    return cells


def train_runs(wildcards):
    """The group's Runs, as the job contract encodes them (a param: a change reruns it)."""
    return [encode(run_config(CFG, cell)) for cell in group_of(wildcards)]


def probe_run(wildcards):
    """The Run of a cell's probe: its own cell at the smaller probe batch size."""
    batch_size = CFG["train"]["probe_batch_sizes"][0]
    return encode(
        run_config(
            CFG, Cell(**{k: wildcards[k] for k in PROBE_AXES}, batch_size=batch_size)
        )
    )


def model_info_of(wildcards):
    """The description of a cell's model on this experiment's data."""
    key = layout.model_key(CFG["model"][wildcards.model], DATASET)
    return layout.MODEL_INFO.format(model=wildcards.model, key=key)


def model_of(wildcards):
    """The model a description is of, when it is this experiment's (its key says so)."""
    if wildcards.model not in CFG["model"] or model_info_of(
        wildcards
    ) != layout.MODEL_INFO.format(**wildcards):
        raise WorkflowError(
            f"{layout.MODEL_INFO.format(**wildcards)}: not a model of this experiment on its "
            "data; run it from the experiment that names it"
        )
    return {"name": wildcards.model, **CFG["model"][wildcards.model]}


def probes_of_group(wildcards):
    """The probes a group's cells predict their step time from, when a step-time limit is set."""
    if not CFG["train"]["max_step_seconds"]:
        return []
    axes = {k: wildcards[k] for k in ("experiment", *PROBE_AXES) if k != "policy"}
    return [layout.PROBE.format(**axes, policy=policy) for policy in POLICIES]


FIT_SEARCH = CFG["sweep"].get("fit_search", True)
PARITY_STEPS = CFG["train"].get("parity_steps", 0)
FITS = (
    sorted({layout.FITS.format(**c.wildcards(EXPERIMENT)) for c in CELLS})
    if FIT_SEARCH
    else []
)
PARITY = (
    sorted(
        {
            layout.PARITY.format(**c.wildcards(EXPERIMENT))
            for c in CELLS
            if len(POLICIES) > 1
        }
    )
    if PARITY_STEPS and any(CFG["policy"][p].get("baseline") for p in POLICIES)
    else []
)


def fits_of_group(wildcards):
    """The searches whose tries give a group's cells their peak memory (none when off)."""
    if not FIT_SEARCH:
        return []
    axes = {k: wildcards[k] for k in ("experiment", *PROBE_AXES) if k != "policy"}
    return [layout.FITS.format(**axes, policy=policy) for policy in POLICIES]


def probe_of_cell(wildcards):
    """The probe a search or parity run predicts its steps from (none without a step limit)."""
    if not CFG["train"]["max_step_seconds"]:
        return []
    return [
        layout.PROBE.format(**{k: wildcards[k] for k in ("experiment", *PROBE_AXES)})
    ]


def fit_run(wildcards):
    """The Run the search starts from: its cell at the grid's smallest batch size."""
    cell = Cell(
        **{k: wildcards[k] for k in PROBE_AXES},
        batch_size=min(CFG["sweep"]["batch_sizes"]),
    )
    if cell not in CELL_SET:
        raise WorkflowError(
            f"{layout.FITS.format(**wildcards)}: not a cell of {EXPERIMENT}"
        )
    return encode(run_config(CFG, cell))


def fit_settings(wildcards):
    """The search's batch sizes, cap, steps per try and the device's memory limit."""
    sweep = CFG["sweep"]
    return {
        "batch_sizes": sweep["batch_sizes"],
        "cap": sweep.get("max_batch") or max(sweep["batch_sizes"]),
        "steps": sweep.get("fit_steps", 2),
        "limit_mb": device_of(wildcards).settings(CFG["device"]).get("memory_limit_mb"),
    }


def parity_settings(wildcards):
    return {
        "steps": PARITY_STEPS,
        "budget_s": CFG["train"].get("parity_budget_s"),
    }


def variant_of(wildcards):
    if wildcards.variant not in CFG["variant"]:
        raise WorkflowError(f"variant {wildcards.variant} is not in this experiment")
    return {"name": wildcards.variant, **CFG["variant"][wildcards.variant]}


def device_of(wildcards):
    return Device(wildcards.device)


def backend_of(wildcards):
    if wildcards.backend not in CFG["backend"]:
        raise WorkflowError(f"backend {wildcards.backend} is not in this experiment")
    return wildcards.backend


def device_tf32(wildcards):
    """Whether a GPU may run float32 as TF32 (device.gpu.tf32); True on a CPU (no effect)."""
    return bool(device_of(wildcards).settings(CFG["device"]).get("tf32", True))


def _calibrated(wildcards):
    return wildcards.machine, wildcards.backend, wildcards.variant, wildcards.device


def calibration_models(wildcards):
    return models_of(*_calibrated(wildcards))


def calibration_batch(wildcards):
    return batch_of(*_calibrated(wildcards))


def calibrate_settings(wildcards):
    """This config's calibrate settings, when they are the ones the path was named after."""
    wanted = calibration_of(*_calibrated(wildcards))
    if wanted != layout.CALIBRATION.format(**wildcards):
        raise WorkflowError(
            f"{layout.CALIBRATION.format(**wildcards)}: not measured with this experiment's "
            "calibrate settings; run it from the experiment that names it"
        )
    return device_of(wildcards).settings(CFG["device"])["calibrate"]


def timing_threads(wildcards):
    """A CPU timing job takes every core Snakemake has; a GPU job its configured few."""
    device = device_of(wildcards)
    if device.is_gpu:
        return device.settings(CFG["device"])["threads"]
    try:
        return workflow.cores
    except WorkflowError:  # no --cores (e.g. a cluster run): the profile sets threads
        return 1


def device_mem_mb(wildcards):
    return device_of(wildcards).settings(CFG["device"])["mem_mb"]


def device_runtime(wildcards):
    return device_of(wildcards).settings(CFG["device"])["runtime_min"]


def device_gpus(wildcards):
    return device_of(wildcards).gpus()


def _timing_slot(device):
    return lambda wildcards: int(wildcards.device == device)


def _target_resource(key):
    """A target's value of one resource (every target names the same: plan/grid.py)."""
    return lambda wildcards: TARGETS[wildcards.machine][key]


# One resource per device: resources: **TIMING_SLOTS in every timing rule; with targets,
# each resource any target names too.
TIMING_SLOTS = {f"timing_{device}": _timing_slot(device) for device in DEVICES} | {
    key: _target_resource(key)
    for key in sorted({k for t in TARGETS.values() for k in t})
}


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


def built_wheels(wildcards):
    """The build rule's wheel folder, for a variant that builds its wheel and was given none."""
    variant = variant_of(wildcards)
    if variant["build"] and not variant["wheel"]:
        return layout.WHEELS.format(variant=wildcards.variant)
    return []


def build_setting(key):
    return lambda wildcards: variant_of(wildcards)["build"][key]


def build_copts(wildcards):
    # Each one quoted: the schema allows only flag characters, and quoting keeps it so.
    return " ".join(
        shlex.quote(f"--copt={c}") for c in variant_of(wildcards)["build"]["copts"]
    )


def build_resource(key, default):
    return lambda wildcards: (variant_of(wildcards)["build"] or {}).get(key, default)


# What each per-group report file is, in Snakemake's report: caption and figure name.
GROUP_REPORT = {
    "ms_per_step.png": ("ms_per_step.rst", "ms/step"),
    "speedup.png": ("speedup.rst", "speedup"),
    "tflops.png": ("tflops.rst", "TFLOP/s"),
    "breakdown.png": ("breakdown_plot.rst", "breakdown"),
    layout.LEARNING_PLOT: ("learning.rst", "loss curves"),
    layout.GROUP_TABLE: ("table.rst", "table"),
    layout.GROUP_DIAGNOSIS: ("diagnosis.rst", "diagnosis"),
}
GROUPS = sorted({c.group for c in CELLS})


def group_reports(report_dir):
    """Every (model, backend, variant, device)'s table, plots and diagnosis, in its report
    category."""
    return [
        snakemake_io.report(
            f"{report_dir}/{layout.group_file(group, name)}",
            caption=f"../report/{GROUP_REPORT[name][0]}",
            category=" · ".join(group),
            labels={
                **dict(zip(GROUP_AXES, group)),
                "figure": GROUP_REPORT[name][1],
            },
        )
        for group in GROUPS
        for name in layout.GROUP_FILES
    ]


def config_arguments(argv):
    """This command line's --config values, shell-quoted (what a later command must repeat)."""
    values, taking = [], False
    for arg in argv[1:]:
        if arg in ("--config", "-C"):
            taking = True
        elif taking and arg.startswith("-"):
            taking = False
        elif taking:
            values.append(arg)
    return shlex.join(values)


def print_headline():
    """When a run ends well: where the report is, how to browse MLflow, and the headline the
    aggregate wrote."""
    headline = Path(REPORT_DIR) / layout.HEADLINE
    if not headline.exists():
        return
    tracking = CFG["tracking"]
    uri, ui = str(tracking["uri"]), tracking["ui"] or ""
    experiment_id = json.loads(Path(TRACKING).read_text())["experiment_id"]
    page = experiment_link(ui, experiment_id) if ui else uri
    browse = (
        f"mlflow ui --backend-store-uri {uri}, then open "
        if uri.startswith("sqlite:")
        else "open "
    )
    args = config_arguments(sys.argv)
    print(
        f"\nmptbench {EXPERIMENT}: the report is {REPORT_DIR}/index.html (tables: "
        f"{REPORT_DIR}/{layout.SUMMARY_CSV}, {REPORT_DIR}/{layout.BREAKDOWN_CSV})"
    )
    print(
        f"  Snakemake's report: snakemake --report results/{EXPERIMENT}/report.zip"
        + (f" --config {args}" if args else "")
    )
    print(f"  MLflow: {browse}{page}")
    for line in headline.read_text().splitlines():
        print(f"  {line}")
    print()


def mark_sweep_failed():
    """When a run ends with errors: its MLflow sweep run ends FAILED instead of staying RUNNING."""
    if not Path(TRACKING).exists():
        return
    from mptbench.jobs.tracking import fail_sweep

    why = fail_sweep(json.loads(Path(TRACKING).read_text()))
    if why:
        print(f"MLflow's sweep run for {EXPERIMENT} was not marked FAILED: {why}")
