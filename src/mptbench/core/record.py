"""The run record's fields, described once: what the record, summary.csv, MLflow and the
report's run table read.

A field's `path` says where it lives in a run record (dotted, into nested dicts); a field
without a path is worked out by the report from several records (speedups, peaks, MFU).
Adding a column is adding a line here (and, for a measured one, setting it in the cell).
Every interval (`<x>_ci_low`, `<x>_ci_high`) has `<x>_log_se` and `<x>_df` beside it
(`interval`), so summary.csv alone recomputes it, at 95% or any other confidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mptbench.core.stats import Estimate


@dataclass(frozen=True)
class Field:
    name: str
    type: type
    path: str | None = ""  # "" = the field's own name at the top of the record
    metric: bool = False  # logged as an MLflow metric of the cell's run
    runs_table: bool = False  # shown in the report's table of runs
    doc: str = ""

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


F = Field
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
    F("parameters", int, metric=True, doc="the model's, from the model_info rule"),
    F("builder", str, doc="a python model's package.module:function"),
    F("builder_sha256", str, doc="the sha256 of the builder's source file"),
    F("variant", str, runs_table=True),
    F("device", str, runs_table=True),
    F("device_name", str, None, doc="GPU name or CPU model, from the fingerprint"),
    F("compute_capability", float, None),
    F("fast_float16", bool, None),
    F("fast_bfloat16", bool, None),
    F("cpu_flags", str, None),
    F("policy", str, runs_table=True),
    F("compute_dtype", str, doc="the policy's, from its yaml"),
    F("baseline", bool, doc="the policy every other is compared with (its yaml: baseline: true)"),
    F("tf32", bool, "fingerprint.tf32", doc="float32 ran as TF32 (GPUs from Ampere on)"),
    F("batch_size", int, runs_table=True),
    F("outcome", str, runs_table=True),
    F("reason", str, runs_table=True),
    F(
        "ms_per_step",
        float,
        metric=True,
        runs_table=True,
        doc="the mean step (what wall time follows): per process the mean timed step, then "
        "their geometric mean",
    ),  # fmt: skip
    F("ms_per_step_median", float, metric=True, doc="geometric mean of the processes' medians"),
    F("ms_per_step_ci_low", float, metric=True, doc="95% t interval over processes, on logs"),
    F("ms_per_step_ci_high", float, metric=True),
    F("ms_per_step_log_se", float, doc="standard error of its mean log (recomputes the interval)"),
    F("ms_per_step_df", int, doc="degrees of freedom of its interval (processes - 1)"),
    F(
        "ms_per_step_p10",
        float,
        metric=True,
        doc="over the timed samples of all repeats (a sample: one step, or on GPUs the mean "
        "step of a block of block_steps steps)",
    ),
    F("ms_per_step_p90", float, metric=True, doc="over the timed samples, as p10"),
    F("images_per_sec", float, metric=True, doc="batch_size at the mean step (ms_per_step)"),
    F(
        "timed_steps",
        int,
        metric=True,
        runs_table=True,
        doc="steps timed over all repeats: timed samples times steps per sample",
    ),
    F("timed_samples", int, metric=True, doc="samples timed over all repeats (one per block)"),
    F("repeats", int, None, runs_table=True, doc="processes the cell was timed in"),
    F(
        "stopped_by",
        str,
        doc="steps, budget, epochs, 'min_timed_steps past epochs', 'epochs (N of "
        "train.min_timed_steps=M timed)' or over_budget, per repeat",
    ),
    F("block_steps", int, "config.device.block_steps", doc="steps per timed sample"),
    F(
        "speedup_vs_baseline",
        float,
        None,
        doc="paired: per process, the mean over the rounds both timed of log(the baseline's "
        "round median step / this one's); exp of their mean over processes (not the ratio of "
        "the two ms_per_step). Unpaired: the ratio of geometric means of process medians",
    ),
    F("speedup_ci_low", float, None, doc="95% t interval over the processes both shared"),
    F("speedup_ci_high", float, None),
    F("speedup_processes", int, None, doc="processes the speedup's interval is over"),
    F("speedup_log_se", float, None, doc="standard error of its mean log (any confidence)"),
    F("speedup_df", int, None, doc="degrees of freedom of its interval (Stein: the first stage's)"),
    F("speedup_paired", bool, None, doc="timed in the same processes as the baseline, in turns"),
    F("speedup_verdict", str, None, doc="faster, slower or no measurable difference"),
    F("synthetic_ms_per_step", float, metric=True, doc="the same mean step, in-memory data"),
    F("synthetic_ms_per_step_ci_low", float, metric=True),
    F("synthetic_ms_per_step_ci_high", float, metric=True),
    F("synthetic_ms_per_step_log_se", float),
    F("synthetic_ms_per_step_df", int),
    F("input_bound_ratio", float, metric=True, doc="the mean step over its twin's, per process"),
    F("input_bound_ratio_ci_low", float, metric=True, doc="95% interval over processes"),
    F("input_bound_ratio_ci_high", float, metric=True),
    F("input_bound_ratio_log_se", float),
    F("input_bound_ratio_df", int),
    F("input_ms_per_batch", float, metric=True, doc="the input pipeline alone, no model"),
    F("input_cpu_ms_per_batch", float, metric=True, doc="its CPU time (all threads)"),
    F(
        "input_bound_ratio_most",
        float,
        metric=True,
        doc="where no twin ran: the most the input can make the step over its compute",
    ),
    F("twin_note", str, doc="why no synthetic twin ran"),
    F("peak_memory_mb", float, metric=True, doc="a short run at this batch (sweep.fit_search)"),
    F("peak_memory_source", str, doc="the framework's GPU peak, cgroup peak or ru_maxrss"),
    F("memory_vs_baseline", float, None, doc="peak memory over the baseline's, same batch size"),
    F("fits_at_batch", bool, doc="false: out of memory at this batch in the search"),
    F("largest_fit_batch", int, metric=True, doc="the policy's largest batch that fit"),
    F("memory_limit_mb", int, doc="the limit the search ran under (null: the device's own)"),
    F(
        "parity_verdict",
        str,
        None,
        doc="does it still learn: follows the baseline, ends "
        "higher/lower, diverged (the parity rule, same seed and data order as the baseline)",
    ),
    F("parity_end_gap", float, None, doc="its end loss minus the baseline's"),
    F("parity_seed_spread", float, None, doc="the baseline's end loss, seed against seed"),
    F("parity_skipped_steps", int, None, doc="steps skipped for non-finite gradients"),
    F("parity_val_accuracy", float, None, doc="after the parity steps, where it validates"),
    F("speedup_compute", float, None, doc="the twins' speedup: compute only, no input"),
    F("speedup_compute_ci_low", float, None),
    F("speedup_compute_ci_high", float, None),
    F("speedup_compute_log_se", float, None),
    F("speedup_compute_df", int, None),
    F("flops_per_step", float, metric=True),
    F("conv_flops_per_step", float, metric=True),
    F("matmul_flops_per_step", float, metric=True),
    F("other_flops_per_step", float, metric=True, doc="elementwise and the rest: not in MFU"),
    F("achieved_tflops", float, metric=True, doc="end to end, at the mean step"),
    F("achieved_tflops_compute", float, metric=True, doc="on the synthetic twin, its mean step"),
    F("peak_tflops", float, None, doc="calibrated, FLOP-weighted over conv and matmul"),
    F("mfu", float, None, doc="achieved_tflops / peak_tflops; none above 1"),
    F("mfu_compute", float, None, doc="achieved_tflops_compute / peak_tflops; none above 1"),
    F("peak_note", str, None, doc="why there is no MFU: the calibration is too low"),
    F("calibration", str, None, doc="the calibration file the peaks come from"),
    F("profiled_ms_per_step", float, "breakdown.profiled_ms_per_step", doc="under the profiler"),
    F(
        "breakdown_closure",
        float,
        "breakdown.closure",
        doc="the measured classes over the profiled step (1: they account for all of it)",
    ),
    F("profile_concurrency", float, "breakdown.concurrency", doc="ops' time over wall time"),
    F("profile_note", str, doc="why a cell that ran has no breakdown"),
    F("peak_vs_float32", float, None, doc="its dtype's peak over float32's, for its FLOP mix"),
    F("matmul_peak_vs_float32", float, None),
    F("conv_peak_vs_float32", float, None),
    F("onednn", str, "fingerprint.onednn"),
    F("xla", bool, "fingerprint.xla"),
    F("tf_unused_cpu_instructions", str, None),
    F("wheel", str, "config.variant.installed.wheel"),
    F("wheel_sha256", str, "config.variant.installed.wheel_sha256"),
    F("build_warning", str, "config.variant.installed.warning"),
    F("final_val_accuracy", float, metric=True),
    F("predicted_step_s", float, metric=True, runs_table=True),
    F("prediction_error", float, metric=True, doc="predicted / measured step - 1"),
    F("duration_s", float, metric=True),
    F("trainer_cpu_percent", float, metric=True, doc="cores the trainer kept busy, median"),
    F("started_at", str),
    F("tensorflow", str, "fingerprint.tensorflow"),
    F("keras", str, "fingerprint.keras"),
    F("jax", str, "fingerprint.jax"),
    F("torch", str, "fingerprint.torch"),
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
METRICS = [f.name for f in FIELDS if f.metric]
RUNS_TABLE = [f.name for f in FIELDS if f.runs_table]
# What every run record must say, or the report cannot place it.
REQUIRED = ("device", "policy", "batch_size", "outcome")


def interval(prefix: str, estimate: Estimate, scale: float = 1.0) -> dict[str, Any]:
    """The columns an interval is kept in: its ends (`scale` times the estimate's: 1000 for
    ms) and what recomputes them at any confidence, value·exp(±t(df)·log_se): the standard
    error of the mean log and the degrees of freedom (under Stein's procedure the first
    stage's processes less one, not all of them less one). All None without an interval."""
    if estimate.low is None:
        names = ("ci_low", "ci_high", "log_se", "df")
        return {f"{prefix}_{name}": None for name in names}
    return {
        f"{prefix}_ci_low": scale * estimate.low,
        f"{prefix}_ci_high": scale * estimate.high,
        f"{prefix}_log_se": estimate.log_se,
        f"{prefix}_df": estimate.df or estimate.n - 1,
    }
