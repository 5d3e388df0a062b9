"""The run record's fields, described once: what the record, summary.csv, MLflow and the
report's run table read.

A field's `path` says where it lives in a run record (dotted, into nested dicts); a field
without a path is derived: worked out by the report from the record or from several records
(speedups, peaks, MFU). Its flags say the rest: `measured` (the cell's repeats gave it:
jobs/combine.py writes it), `per_repeat` (each repeat measures it), `metric` and `tag` (on the
cell's MLflow run: logged by the train job, or for a derived field given back by the report),
`runs_table` (a column of the report's table of runs).

Adding a column is adding a line here, and for a per_repeat one the engine setting it in its
ArmResult's `measured` (jobs/combine.py keeps each repeat's value and their median), for a
derived one report/summary.py working it out; a figure combined otherwise (an interval, a ratio
of two) is code in jobs/combine.py. A record holds nothing else but STRUCTURAL's parts.
Every interval (`<x>_ci_low`, `<x>_ci_high`) has `<x>_log_se` and `<x>_df` beside it
(`interval`), so summary.csv alone recomputes it, at 95% or any other confidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mptbench.core.frameworks import VERSION_FIELDS
from mptbench.core.stats import Estimate

# How far the probe's predicted step may be from the measured one: bench/bench_budget.py
# measured the two-point prediction within it on 2-core CPUs. The budget lets a cell predicted
# up to this much over its limit run (jobs/budget.py); the report calls a prediction beyond it
# off (report/causes.py).
PREDICTION_TOLERANCE = 0.3


@dataclass(frozen=True)
class Field:
    name: str
    type: type
    path: str | None = ""  # "" = the field's own name at the top of the record; None: derived
    measured: bool = False  # the cell's repeats gave it: jobs/combine.py writes it from them
    # Each repeat measures it (the engine, in ArmResult.measured): every repeat's value is kept
    # in its entry of the record's repeats, the cell's is their median over its ok repeats.
    per_repeat: bool = False
    metric: bool = False  # an MLflow metric of the cell's run
    tag: bool = False  # an MLflow tag of the cell's run
    runs_table: bool = False  # shown in the report's table of runs
    doc: str = ""

    def __post_init__(self) -> None:
        if self.per_repeat and not (self.measured and self.numeric):
            raise ValueError(f"{self.name}: a per_repeat field is a measured number")
        if self.measured and self.derived:
            raise ValueError(f"{self.name}: a measured field is in the record: it has a path")
        if self.metric and not self.numeric:
            raise ValueError(f"{self.name}: an MLflow metric is a number (a string is a tag)")

    @property
    def numeric(self) -> bool:
        return self.type in (int, float)

    @property
    def derived(self) -> bool:
        return self.path is None

    def read(self, record: dict[str, Any]) -> Any:
        value: Any = record
        for key in (self.path or self.name).split("."):
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value


# A field the train job records: what the cell was run with, its model's size and FLOPs, its
# probe's prediction, its fits search, where and when it ran.
F = Field


# One its repeats measured: jobs/combine.py writes it from them.
def M(name: str, type: type, path: str | None = "", **flags: Any) -> Field:
    return Field(name, type, path, measured=True, **flags)


# One the report derives from its record or from several records.
def D(name: str, type: type, **flags: Any) -> Field:
    return Field(name, type, None, **flags)


INTERVAL_COLUMNS = ("ci_low", "ci_high", "log_se", "df")  # `interval` writes these, no other


def interval_fields(kind, name: str, unit: str = "", df: str = "", **ends: Any) -> tuple:
    """The columns of `name`'s 95% interval over processes (made by M or D), as `interval`
    writes them: ends, the standard error of the mean log, degrees of freedom (`df`: how
    they are counted, where not processes - 1)."""
    low, high, log_se, dof = (f"{name}_{column}" for column in INTERVAL_COLUMNS)
    return (
        kind(low, float, doc=f"95% t interval over processes, on logs{unit}", **ends),
        kind(high, float, **ends),
        kind(log_se, float, doc="standard error of its mean log (recomputes the interval)"),
        kind(dof, int, doc=f"degrees of freedom of its interval{df or ' (processes - 1)'}"),
    )


def with_interval(kind, name: str, doc: str, unit: str = "", **flags: Any) -> tuple[Field, ...]:
    """A figure (made by M or D) and its interval's columns (`interval_fields`)."""
    ends = {k: v for k, v in flags.items() if k == "metric"}
    return (kind(name, float, doc=doc, **flags), *interval_fields(kind, name, unit, **ends))


FIELDS: tuple[Field, ...] = (
    F("experiment", str),
    F(
        "machine",
        str,
        runs_table=True,
        doc="the hardware it ran on, part of its key: this machine's id or a sweep.targets name",
    ),
    F("model", str, runs_table=True),
    F("backend", str, runs_table=True, doc="Keras backend: tensorflow, jax or torch"),
    F("dataset", str),
    F("image_size", int),
    F("train_examples", int, doc="the training split's size: the prepared data's splits.train"),
    F("train_epochs", int, "config.train.epochs", doc="train.epochs the cell was run with"),
    F("parameters", int, metric=True, doc="the model's, from the model_info rule"),
    F("builder", str, tag=True, doc="a python model's package.module:function"),
    F("builder_sha256", str, tag=True, doc="the sha256 of the builder's source file"),
    F("variant", str, runs_table=True),
    F("variant_description", str, "config.variant.description", doc="its yaml's, in a few words"),
    F("backend_description", str, "config.backend.description", doc="its yaml's, in a few words"),
    F("device", str, runs_table=True),
    D("device_name", str, doc="GPU name or CPU model, from the fingerprint"),
    D("compute_capability", float),
    D("fast_float16", bool),
    D("fast_bfloat16", bool),
    D("cpu_flags", str),
    F("policy", str, runs_table=True),
    F("compute_dtype", str, doc="the policy's, from its yaml"),
    F("keras_policy", str, doc="Keras' name for the policy's dtypes (set_global_policy's)"),
    F("float32_layers", str, doc="the layer classes it computes in float32, space-separated"),
    F("loss_scaling", str, doc="dynamic or none, from its yaml"),
    F("baseline", bool, doc="the policy every other is compared with (its yaml: baseline: true)"),
    F("tf32", bool, "fingerprint.tf32", doc="float32 ran as TF32 (GPUs from Ampere on)"),
    F("batch_size", int, runs_table=True),
    M("outcome", str, tag=True, runs_table=True),
    M("reason", str, tag=True, runs_table=True),
    M(
        "ms_per_step",
        float,
        metric=True,
        runs_table=True,
        doc="the mean step (what wall time follows): per process the mean timed step, then "
        "their geometric mean",
    ),
    M("ms_per_step_median", float, metric=True, doc="geometric mean of the processes' medians"),
    *interval_fields(M, "ms_per_step", metric=True),
    M(
        "ms_per_step_p10",
        float,
        metric=True,
        doc="over the timed samples of all repeats (a sample: one step, or on GPUs the mean "
        "step of a block of block_steps steps)",
    ),
    M("ms_per_step_p90", float, metric=True, doc="over the timed samples, as p10"),
    M("images_per_sec", float, metric=True, doc="batch_size at the mean step (ms_per_step)"),
    M(
        "timed_steps",
        int,
        metric=True,
        runs_table=True,
        doc="steps timed over all repeats: timed samples times steps per sample",
    ),
    M("timed_samples", int, metric=True, doc="samples timed over all repeats (one per block)"),
    D("repeats", int, runs_table=True, doc="processes the cell was timed in"),
    F("processes_why", str, runs_table=True,
      doc="why its speedup took those processes: settled (by the first stage, at 99%), "
      "precise (within train.precision), futile (more could not bring it near), most "
      "(train.max_repeats), host (its slowdown asked for them all), fixed (precision null)"),
    M(
        "stopped_by",
        str,
        doc="steps, budget, epochs, 'min_timed_steps past epochs', 'epochs (N of "
        "train.min_timed_steps=M timed)' or over_budget, per repeat",
    ),
    F("block_steps", int, "config.device.block_steps", doc="steps per timed sample"),
    D(
        "speedup_vs_baseline",
        float,
        metric=True,
        doc="paired: per process, the mean over the rounds both timed of log(the baseline's "
        "round median step / this one's); exp of their mean over processes (not the ratio of "
        "the two ms_per_step). Unpaired: the ratio of geometric means of process medians",
    ),
    *interval_fields(D, "speedup", " (over the processes both shared)",
                     " (Stein: the first stage's processes - 1)", metric=True),
    D("speedup_processes", int, doc="processes the speedup's interval is over"),
    D("speedup_paired", bool, doc="timed in the same processes as the baseline, in turns"),
    D("speedup_verdict", str, tag=True, doc="faster, slower or no measurable difference"),
    M("synthetic_ms_per_step", float, metric=True, doc="the same mean step, in-memory data"),
    *interval_fields(M, "synthetic_ms_per_step", metric=True),
    M("input_bound_ratio", float, metric=True, doc="the mean step over its twin's, per process"),
    *interval_fields(M, "input_bound_ratio", metric=True),
    M(
        "input_ms_per_batch",
        float,
        per_repeat=True,
        metric=True,
        doc="the input pipeline alone, no model",
    ),
    M(
        "input_cpu_ms_per_batch",
        float,
        per_repeat=True,
        metric=True,
        doc="its CPU time (all threads)",
    ),
    M(
        "input_bound_ratio_most",
        float,
        metric=True,
        doc="where no twin ran: the most the input can make the step over its compute",
    ),
    M("twin_note", str, doc="why no synthetic twin ran"),
    F("peak_memory_mb", float, metric=True, doc="a short run at this batch (sweep.fit_search)"),
    F("peak_memory_source", str, doc="the framework's GPU peak, or VmHWM"),
    D(
        "memory_vs_baseline",
        float,
        metric=True,
        doc="peak memory over the baseline's, same batch size",
    ),
    F("fits_at_batch", bool, doc="false: out of memory at this batch in the search"),
    F("largest_fit_batch", int, metric=True, doc="the policy's largest batch that fit"),
    F("fits_search_mb", int, doc="the memory the fits search ran in (null: the device's own)"),
    D(
        "parity_verdict",
        str,
        tag=True,
        doc="does it still learn: follows the baseline, ends "
        "higher/lower, diverged (the parity rule, same seed and data order as the baseline)",
    ),
    D("parity_end_gap", float, metric=True, doc="its end loss minus the baseline's"),
    D("parity_seed_spread", float, metric=True, doc="the baseline's end loss, seed against seed"),
    D("parity_skipped_steps", int, metric=True, doc="steps skipped for non-finite gradients"),
    D("parity_val_accuracy", float, doc="after the parity steps, where it validates"),
    D("speedup_compute", float, metric=True, doc="the twins' speedup: compute only, no input"),
    *interval_fields(D, "speedup_compute", metric=True),
    F("flops_per_step", float, metric=True),
    F("conv_flops_per_step", float, metric=True),
    F("matmul_flops_per_step", float, metric=True),
    F("other_flops_per_step", float, metric=True, doc="elementwise and the rest: not in MFU"),
    M("achieved_tflops", float, metric=True, doc="end to end, at the mean step"),
    M("achieved_tflops_compute", float, metric=True, doc="on the synthetic twin, its mean step"),
    D("peak_tflops", float, metric=True, doc="calibrated, FLOP-weighted over conv and matmul"),
    D("mfu", float, metric=True, doc="achieved_tflops / peak_tflops; none above 1"),
    D("mfu_compute", float, metric=True, doc="achieved_tflops_compute / peak_tflops; none above 1"),
    D("peak_note", str, doc="why there is no MFU: the calibration is too low"),
    D("calibration", str, doc="the calibration file the peaks come from"),
    M("profiled_ms_per_step", float, "breakdown.profiled_ms_per_step", doc="under the profiler"),
    M(
        "breakdown_closure",
        float,
        "breakdown.closure",
        metric=True,
        doc="the measured classes over the profiled step (1: they account for all of it)",
    ),
    M("profile_concurrency", float, "breakdown.concurrency", doc="ops' time over wall time"),
    M("profile_note", str, doc="why a cell that ran has no breakdown"),
    D("peak_vs_float32", float, doc="its dtype's peak over float32's, for its FLOP mix"),
    D("matmul_peak_vs_float32", float),
    D("conv_peak_vs_float32", float),
    F("onednn", str, "fingerprint.onednn"),
    F(
        "isa_cap",
        str,
        "config.variant.isa",
        tag=True,
        doc="the instruction set its variant capped the kernels at (variant.<name>.isa)",
    ),
    F(
        "kernel_isa",
        str,
        "fingerprint.kernel_isa",
        tag=True,
        doc="the highest instruction set any oneDNN kernel of its process was built for, as "
        "oneDNN named it (ONEDNN_VERBOSE=profile_create; core/isa.py)",
    ),
    F("kernel_isa_own", str, "fingerprint.kernel_isa_own", doc="the same, its dtype's kernels"),
    F("kernels", str, "fingerprint.kernels", doc="its dtype's oneDNN kernels, most made first"),
    F("onednn_isa", str, "fingerprint.onednn_isa", doc="oneDNN's words for what it may use"),
    D("kernel_above_cap", bool, doc="a kernel above its variant's cap ran: the cap did not take"),
    F("xla", bool, "fingerprint.xla"),
    D("tf_unused_cpu_instructions", str),
    F("wheel", str, "config.variant.installed.wheel"),
    F("wheel_sha256", str, "config.variant.installed.wheel_sha256"),
    F("build_warning", str, "config.variant.installed.warning"),
    M("final_val_accuracy", float, metric=True),
    F("predicted_step_s", float, metric=True, runs_table=True),
    M("prediction_error", float, metric=True, doc="predicted / measured step - 1"),
    F("duration_s", float, metric=True),
    M("trainer_cpu_percent", float, metric=True, doc="cores the trainer kept busy, median"),
    M(
        "cpu_stolen_pct",
        float,
        per_repeat=True,
        metric=True,
        doc="percent of the machine's CPU time the hypervisor gave to others while the arms "
        "trained (steal time, /proc/stat): 0 on bare metal",
    ),
    M("cpu_stolen_pct_most", float, metric=True, doc="the most any of its processes lost"),
    M(
        "host_ms",
        float,
        per_repeat=True,
        metric=True,
        doc="the host's own speed while the arms trained: a fixed float32 matmul's time "
        "(device.<kind>.host_check), the median of the samples taken between turns",
    ),
    M("host_fastest_ms", float, doc="the fastest host_ms this host, build and device recorded"),
    M(
        "host_slowdown",
        float,
        metric=True,
        doc="host_ms over host_fastest_ms, geometric mean over its processes (1: its own speed)",
    ),
    M("host_slowdown_most", float, metric=True, doc="the most any of its processes ran slower"),
    M(
        "host_widening",
        float,
        metric=True,
        doc="added to every interval of the row on the log scale, value·exp(±(t·log_se + "
        "host_widening)): the slowdown all its processes shared beyond 20% (core/host.py)",
    ),
    *with_interval(
        M,
        "validation_ms_per_batch",
        "a validation batch (forward only) at the cell's batch size: per process the mean "
        "of its steady batches, then their geometric mean",
        metric=True,
    ),
    M("validation_first_ms", float, doc="the first validation batch, which compiles the test "
      "step: the median over processes"),
    F("validation_examples", int, doc="the validation split's size"),
    M("fullrun_epochs", int, doc="the whole run's epochs: train.epochs, or the 2020 run's 20"),
    M("fullrun_validates", bool, doc="whether the whole run validates after each epoch"),
    M("fullrun_source", str, doc="which run: train.epochs or the 2020 experiment's"),
    *with_interval(
        M,
        "fullrun_s",
        "the whole run as fit spends it (core/fullrun.py): steps + validation + the first "
        "epoch's one-time extra + the epoch starts, per process, then their geometric mean",
        " (seconds)",
        metric=True,
        runs_table=True,
    ),
    *with_interval(M, "fullrun_steps_s", "its training steps: epochs x steps x the mean step",
                   metric=True),
    *with_interval(
        M, "fullrun_validation_s", "its validation passes: epochs x batches x a batch", metric=True
    ),
    *with_interval(
        M,
        "fullrun_first_epoch_s",
        "the first epoch's one-time extra: warm-up steps and the first validation batch over "
        "as many steady ones (compiling the train and test steps)",
        metric=True,
    ),
    *with_interval(
        M,
        "fullrun_epoch_starts_s",
        "what its epochs' starts wait for the last epoch's tf.data tuning thread (core/epochs.py):"
        " epochs - 1 x the share of the process's epoch starts that waited x the rest of the"
        " period at its epoch length, averaged over fullrun_epoch_spread (core/fullrun.py)",
        metric=True,
    ),
    M("fullrun_epoch_wait_s", float, metric=True, doc="what one of the whole run's epoch starts "
      "waits where it waits: the rest of the tuning thread's period at its epoch length, "
      "averaged over fullrun_epoch_spread"),
    M("fullrun_epoch_s", float, metric=True, doc="the whole run's epoch: its steps and "
      "validation, the processes' median"),
    M("fullrun_epoch_spread", float, doc="how far a run's epoch length is taken to spread: the "
      "processes' standard deviation of its logarithm, at least core/epochs.py "
      "EPOCH_SPREAD_FLOOR"),
    M("fullrun_epoch_wake_s", float, doc="a wake of the tuning thread within two spreads of the "
      "epoch's length: a start that waits loses nearly nothing or nearly a whole period"),
    M("epoch_starts_timed", int, metric=True, doc="epoch starts its processes timed that tell a "
      "wait from none (a one-epoch run's own epochs: train.epoch_seconds)"),
    M("epoch_starts_waited", int, metric=True, doc="of those, the ones whose first batch waited "
      "the rest of the last iterator's tuning period"),
    M("epoch_wait_ms", float, doc="how long those waited, their median"),
    M("epoch_wait_most_ms", float, doc="the longest of them"),
    M("epoch_note", str, doc="why no epoch start was timed"),
    M("fullrun_note", str, doc="why a cell that ran has no whole-run figure"),
    *with_interval(
        D,
        "fullrun_speedup",
        "the baseline's whole run over this one's, paired per process (both in the same "
        "processes), over processes as speedup_vs_baseline",
        metric=True,
    ),
    F("started_at", str),
    *(F(name, str, f"fingerprint.{name}", doc="its framework's version, where it ran on it")
      for name in VERSION_FIELDS),
    F("keras", str, "fingerprint.keras"),
    F("host", str, "fingerprint.host", runs_table=True),
    F(
        "hardware_id",
        str,
        "hardware.id",
        doc="the device's id where the job ran (core/hardware.py): its model, cores or memory",
    ),
    F("mptbench", str, doc="the mptbench version that measured it"),
    F("mlflow_run_id", str, runs_table=True),
    F("mlflow_experiment_id", str),
)
BY_NAME = {f.name: f for f in FIELDS}
COLUMNS = [f.name for f in FIELDS]
# The cell's MLflow run: the train job logs what the record holds (jobs/tracking.py), the report
# gives back what it derives (report/aggregate.py).
METRICS = [f.name for f in FIELDS if f.metric and not f.derived]
TAGS = [f.name for f in FIELDS if f.tag and not f.derived]
REPORT_METRICS = [f.name for f in FIELDS if f.metric and f.derived]
REPORT_TAGS = [f.name for f in FIELDS if f.tag and f.derived]
PER_REPEAT = [f.name for f in FIELDS if f.per_repeat]
RUNS_TABLE = [f.name for f in FIELDS if f.runs_table]
# What a run record holds besides its fields, and why each is no column of its own.
STRUCTURAL = {
    "config": "the Run the cell was run with, in full (core/contract/run.py); fields such as "
    "block_steps and wheel read parts of it by path",
    "fingerprint": "the software and hardware facts of the trainer's process "
    "(engine/fingerprint.py), nested; fields such as tensorflow and host read them by path",
    "hardware": "the identity of the hardware the job ran on (core/hardware.py), checked "
    "against its calibration's; hardware_id reads its id",
    "repeats": "each repeat's own figures and raw steps with their rounds and process, which "
    "the report pairs with the baseline's for the speedup; the field repeats counts them",
    "epochs": "the first timed repeat's loss and accuracy per epoch (MLflow's per-epoch "
    "metrics); final_val_accuracy is its last validation accuracy",
    "breakdown": "the op-level breakdown per class, per layer and class, and per profile "
    "(breakdown.csv, layers.csv, the report's breakdown tables); three fields read it by path",
    "warmup_steps": "train.warmup_steps as the cell ran them, beside its timing (config has "
    "it too), the same for every cell of a run",
    "builder_file": "the builder's source file on the machine that ran it, a path that means "
    "nothing elsewhere; builder and builder_sha256 are its columns",
    "flops_counted_by": "what counted the model's FLOPs (the profiler and its version), the "
    "same for every cell of a model",
}
# What every run record must say, or the report cannot place it.
REQUIRED = ("device", "policy", "batch_size", "outcome")


def fit_at(batch_size: int, fits_at_batch: bool | None, largest_fit_batch: int | None
           ) -> bool | None:
    """Whether a cell's batch fit in the fits search (True, False), None where no search
    covered it: the search's word at this batch, else the batch against the largest that fit
    (None: not given)."""
    if fits_at_batch is not None:
        return bool(fits_at_batch)
    if largest_fit_batch is not None:
        return int(batch_size) <= int(largest_fit_batch)
    return None


def interval(prefix: str, estimate: Estimate, scale: float = 1.0) -> dict[str, Any]:
    """The columns an interval is kept in: its ends (`scale` times the estimate's: 1000 for
    ms) and what recomputes them at any confidence, value·exp(±t(df)·log_se): the standard
    error of the mean log and the degrees of freedom (under Stein's procedure the first
    stage's processes less one, not all of them less one). All None without an interval."""
    if estimate.low is None:
        return {f"{prefix}_{name}": None for name in INTERVAL_COLUMNS}
    return {
        f"{prefix}_ci_low": scale * estimate.low,
        f"{prefix}_ci_high": scale * estimate.high,
        f"{prefix}_log_se": estimate.log_se,
        f"{prefix}_df": estimate.df or estimate.n - 1,
    }
