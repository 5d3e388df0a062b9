"""Where everything lives: one path pattern per kind of file (results/ and resources/).

The Snakemake rules and the library both take their paths from here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mptbench.core.cells import AXES, GROUP_AXES, PROBE_AXES, Cell
from mptbench.core.contract.kinds import KINDS, PER_COMPARISON, PER_PROBE_CELL

# What a copy of the workflow needs to run, beside the results and resources it makes (the
# tests' and benchmarks' fresh checkouts copy these).
WORKFLOW_FILES = ("Snakefile", "conf", "workflow", "src", "profiles", "envs")
RESULTS = "results/{experiment}"
# One path per run; its wildcards spell the grid cell, in axis order. The aggregate step reads
# these.
CELL = "/".join(f"{{{axis}}}" for axis in AXES[:-1]) + "/bs{batch_size}"
PROBE_CELL = "/".join(f"{{{axis}}}" for axis in PROBE_AXES)
GROUP = "/".join(f"{{{axis}}}" for axis in GROUP_AXES)
# A comparison group (its cells differ only in policy): its profiles, its parity run.
COMPARISON = GROUP + "/bs{batch_size}"
RUN_RECORD = RESULTS + "/runs/" + CELL + ".json"
# A train job times a series: every comparison group of one model, backend, variant and device
# (a report group), their processes interleaved (jobs/series.py).
RUN_LOG = RESULTS + "/logs/train/" + GROUP + ".log"
# The fastest the host ran the host_check kernel, kept across runs and experiments
# (jobs/host.py): not an output of any rule, updated by every train job on its device.
HOST = "results/host/{machine}/{backend}/{variant}/{device}.json"
# The raw op-level profiles of a cell, one folder per repeat (TensorBoard/XProf:
# logdir/plugins/profile/...).
PROFILE = RESULTS + "/profiles/" + COMPARISON + "/{policy}"
# Each job kind's rule outputs, where its declaration gives them a folder (core/contract/
# kinds.py), by its one name: a probe's, a fits search's (its tries, each with its peak memory)
# per model, backend, variant, device and policy; a parity run's per comparison group.
KEYS = {PER_PROBE_CELL: PROBE_CELL, PER_COMPARISON: COMPARISON}
OUTPUTS = {
    k.feature: f"{RESULTS}/{k.folder}/{KEYS[k.keyed_by]}.json" for k in KINDS.values() if k.folder
}
OUTPUT_LOGS = {
    k.feature: f"{RESULTS}/logs/{k.feature}/{KEYS[k.keyed_by]}.log"
    for k in KINDS.values()
    if k.folder
}
# What a model is (it builds; its parameters and FLOPs), once per model configuration and
# dataset (image size, classes): shared by every experiment that trains the same model on it.
MODEL_INFO = "results/models/{model}/{key}.json"
MODEL_INFO_LOG = "results/models/{model}/{key}.log"
TRACKING = RESULTS + "/mlflow_experiment.json"
REPORT_DIR = RESULTS + "/report"
# The report: summary.csv, breakdown.csv (one row per profiled cell and op class), index.html
# and the published plot at its top; the rest per model, backend, variant and device, in
# <model>/<backend>/<variant>/<device>/.
SUMMARY_CSV = "summary.csv"
BREAKDOWN_CSV = "breakdown.csv"
LAYERS_CSV = "layers.csv"  # one row per profiled cell, layer of its model and op class
INDEX_HTML = "index.html"
HEADLINE = "headline.txt"  # what a finished run prints: per group, the best speedup
PUBLISHED_PLOT = "published_ms_per_step.png"
GROUP_PLOTS = ("ms_per_step.png", "speedup.png", "tflops.png", "breakdown.png")
LEARNING_PLOT = "learning.png"  # does it still learn: the loss curves of the parity rule
GROUP_TABLE = "table.csv"
GROUP_DIAGNOSIS = "diagnosis.html"
GROUP_FILES = (*GROUP_PLOTS, LEARNING_PLOT, GROUP_TABLE, GROUP_DIAGNOSIS)
# What each per-group report file is in Snakemake's report: its caption (workflow/report/,
# as a rule file names it) and its figure's name.
GROUP_REPORT = {
    "ms_per_step.png": ("ms_per_step.rst", "ms/step"),
    "speedup.png": ("speedup.rst", "speedup"),
    "tflops.png": ("tflops.rst", "TFLOP/s"),
    "breakdown.png": ("breakdown_plot.rst", "breakdown"),
    LEARNING_PLOT: ("learning.rst", "loss curves"),
    GROUP_TABLE: ("table.rst", "table"),
    GROUP_DIAGNOSIS: ("diagnosis.rst", "diagnosis"),
}


def group_file(group: tuple[str, ...], name: str) -> str:
    """A per-group report file (group: its GROUP_AXES values), relative to the report folder."""
    return GROUP.format(**dict(zip(GROUP_AXES, group, strict=True))) + f"/{name}"


def group_reports(cells: list[Cell], report_dir: str) -> list[tuple[str, dict[str, Any]]]:
    """Every group's table, plots and diagnosis, each with what Snakemake's report shows it
    under (caption, category: the group, labels: its axes and the figure's name)."""
    return [
        (f"{report_dir}/{group_file(group, name)}", _shown(group, name))
        for group in sorted({cell.group for cell in cells})
        for name in GROUP_FILES
    ]


def _shown(group: tuple[str, ...], name: str) -> dict[str, Any]:
    caption, figure = GROUP_REPORT[name]
    labels = dict(zip(GROUP_AXES, group, strict=True))
    return {
        "caption": f"../report/{caption}",
        "category": " · ".join(group),
        "labels": {**labels, "figure": figure},
    }


# A calibration is kept per machine, backend, variant, device and the settings it was measured
# with, so experiments that share them (smoke and benchmark do not) share one calibration.
CALIBRATION = "results/calibration/{machine}/{backend}/{variant}/{device}/{settings}.json"
CALIBRATION_LOG = "results/calibration/{machine}/{backend}/{variant}/{device}/{settings}.log"
VARIANT_ENV = "resources/envs/{variant}.json"
GPU_CHECK_LOG = "resources/logs/environment/gpus.log"  # the check before a run's first job
WHEELS = "resources/wheels/{variant}"
BAZELISK = "resources/build/{variant}/bazelisk.path"
SOURCE_TREE = "resources/build/{variant}/tensorflow"
FIXTURE = "resources/fixtures/{archive}"
DOWNLOAD = "resources/downloads/{archive}"
TFDS = "resources/tfds"


def dataset_key(dataset: dict[str, Any]) -> str:
    """Names the prepared cache: dataset and image size (the builder version is inside)."""
    return f"{dataset['name']}-{dataset['image_size']}px"


def prepared(dataset: dict[str, Any]) -> str:
    """The prepare rule's output: what the train jobs need to read the cache."""
    return f"{TFDS}/{dataset_key(dataset)}.json"


def archive_path(dataset: dict[str, Any]) -> str:
    """What the prepare rule reads: the verified download, the user's folder of images, or
    nothing (synthetic data)."""
    if dataset["builder"] == "image_folder":
        return str(dataset["path"])
    if dataset["builder"] == "synthetic":
        return ""
    return DOWNLOAD.format(archive=archive_name(dataset))


def archive_name(dataset: dict[str, Any]) -> str:
    url = str(dataset["url"])
    name = url.rstrip("/").rsplit("/", 1)[-1]
    return name if name.endswith((".tgz", ".tar.gz", ".tar")) else f"{dataset['name']}.tgz"


def model_info(name: str, model: dict[str, Any], dataset: dict[str, Any]) -> str:
    """The model_info rule's output for a model (name, its config) on a dataset's cache."""
    return MODEL_INFO.format(model=name, key=model_key(model, dataset))


def model_key(model: dict[str, Any], dataset: dict[str, Any]) -> str:
    """What a model's description depends on, as 12 hex digits: its configuration and the
    shape of what it takes (image size and classes). Two datasets of one shape (a mirror of
    Imagenette, imagenette2-160 and -320 at one size) share it, and the calibration that times
    the model's convolutions with it; a folder of images, whose classes only its cache knows,
    keys on that cache."""
    facts = {"model": model, "data": model_data(dataset)}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]


def model_data(dataset: dict[str, Any]) -> dict[str, int] | str:
    """The shape of a dataset's examples where its config gives it, else its cache's name."""
    if dataset.get("num_classes"):
        return {"image_size": dataset["image_size"], "num_classes": dataset["num_classes"]}
    return dataset_key(dataset)


def calibration_key(
    variant: dict[str, Any],
    settings: dict[str, Any],
    tf32: bool | None = None,
    models: list[str] = (),
    batch: int = 0,
) -> str:
    """What a calibration depends on, as 12 hex digits: its sizes, the variant's build and
    settings (environment, XLA, wheel), on GPUs the TF32 setting, and the descriptions of the
    models whose own convolutions it times (`models`: their paths, which name their keys) and
    the largest batch it times them at."""
    facts = {
        "settings": settings,
        "variant": {k: variant.get(k) for k in ("env", "jit_compile", "wheel", "build")},
    }
    if models:
        facts["models"], facts["batch"] = sorted(models), batch
    if tf32 is not None:
        facts["tf32"] = tf32
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]
