# Composes the Hydra config once, expands the grid and binds the plan (src/mptbench/plan/:
# each rule's inputs, params and resources, unit-tested there) to it for the rules.
import json
import os
import sys
from functools import partial
from pathlib import Path

# This checkout's mptbench first, here and (plan/environment.py src_first) in every job's
# process: Snakemake appends its own search paths after site-packages, where an installed
# mptbench (editable or not, of another checkout) would win.
SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SRC))

from mptbench.core.cells import BACKENDS
from mptbench.core.hardware import PATTERN as MACHINE_PATTERN
from mptbench.core.devices import PATTERN as DEVICE_PATTERN
from mptbench.plan import (
    ConfigError,
    compose_config,
    expand_devices,
    grid,
    left_out,
    machines,
    workflow_overrides,
)
from mptbench.plan import calibrate, groups, headline, inputs, layout, params, resources
from mptbench.plan.environment import gpu_checks, src_first
from mptbench.plan.profile import check_profiles
from mptbench.report.merge import folder_files, split as split_include
from mptbench.report.records import ReportError
import snakemake.io as snakemake_io  # `report(` at a line's start would open a directive


envvars:
    "PATH",


# Every job's script runs the interpreter that runs Snakemake, whether or not its venv is
# active, with this checkout's src/ first on its path.
os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), os.environ["PATH"]]
)
src_first(SRC)

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
        # Snakemake's own --config, not the composed config: without experiment=, Hydra's
        # default experiment.
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
    *[name for name in CFG["tracking"]["env_if_set"] if name in os.environ]
)
EXPERIMENT = CFG["name"]
DATASET = CFG["dataset"]
CELLS = grid(CFG, DEVICES, MACHINES)
POLICIES = list(CFG["policy"])
BATCH_SIZES = CFG["sweep"]["batch_sizes"]
# A train job's outputs: every record and profile folder of its series (a comparison group per
# batch size, a cell per policy in each).
SERIES_RECORDS = expand(
    layout.RUN_RECORD, policy=POLICIES, batch_size=BATCH_SIZES, allow_missing=True
)
SERIES_PROFILES = expand(
    layout.PROFILE, policy=POLICIES, batch_size=BATCH_SIZES, allow_missing=True
)
ARCHIVE = layout.archive_path(DATASET)
PREPARED = layout.prepared(DATASET)
TRACKING = layout.TRACKING.format(experiment=EXPERIMENT)
REPORT_DIR = layout.REPORT_DIR.format(experiment=EXPERIMENT)
# What the report is made of: every cell's record and calibration, and the outputs of the job
# kinds it reads (core/contract/kinds.py REPORTED: the fits searches, the parity runs).
RECORDS = inputs.records(CFG, CELLS)
CALIBRATIONS = calibrate.calibrations(CFG, CELLS)
REPORTED = inputs.reported(CFG, CELLS)
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
    if resources.slot(_device) not in workflow.global_resources:
        workflow.register_resource(resources.slot(_device), 1)
try:
    _cores = workflow.cores
except WorkflowError:  # no --cores (e.g. a cluster run): the profile sets threads
    _cores = None
# What every timing rule (probe, train, fits, parity, calibrate) asks for, written once.
TIMING = resources.Timing(CFG, DEVICES, _cores)


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


# Each rule's inputs and params: functions of a job's wildcards, bound to this config.
model_info_of = partial(inputs.model_info, CFG)
probes_of_group = partial(inputs.group_probes, CFG)
fits_of_group = partial(inputs.group_fits, CFG)
probe_of_cell = partial(inputs.cell_probe, CFG)
built_wheels = partial(inputs.built_wheels, CFG)
local_inputs = inputs.local_inputs
train_runs = partial(groups.train_runs, CFG, CELLS)
group_runs = partial(groups.group_runs, CFG, CELLS)
probe_run = partial(groups.probe_run, CFG)
fit_run = partial(groups.fit_run, CFG, CELLS)
model_of = partial(params.model, CFG)
variant_of = partial(params.variant, CFG)
backend_of = partial(params.backend, CFG)
fit_settings = partial(params.fit_settings, CFG)
build_copts = partial(params.build_copts, CFG)
output_dir = params.output_dir
host_reference = params.host_reference
calibration_models = partial(calibrate.models, CFG, CELLS)
calibration_batch = partial(calibrate.batch, CELLS)
calibrate_settings = partial(calibrate.settings, CFG, CELLS)
device_tf32 = partial(calibrate.tf32, CFG)


def build_setting(key):
    return partial(params.build_setting, CFG, key)


def group_reports(report_dir):
    """Every group's table, plots and diagnosis, in its category of Snakemake's report."""
    return [
        snakemake_io.report(path, **shown)
        for path, shown in layout.group_reports(CELLS, report_dir)
    ]


def print_headline():
    """When a run ends well: where the report is, how to browse MLflow, the headline."""
    text = headline.text(CFG, sys.argv)
    if text:
        print(text)


def check_gpus():
    """Before the first job: each backend the grid times on a GPU sees one, or the run stops
    with the line that says what to install, before the download and the cache."""
    from mptbench.jobs.environment import gpu_problems

    problems = gpu_problems(gpu_checks(CFG, CELLS), Path(layout.GPU_CHECK_LOG))
    if problems:
        raise WorkflowError(f"mptbench: {'; '.join(problems)}")


def mark_sweep_failed():
    """When a run ends with errors: its MLflow sweep run ends FAILED instead of staying RUNNING."""
    if not Path(TRACKING).exists():
        return
    from mptbench.jobs.tracking import fail_sweep

    why = fail_sweep(json.loads(Path(TRACKING).read_text()))
    if why:
        print(f"MLflow's sweep run for {EXPERIMENT} was not marked FAILED: {why}")
