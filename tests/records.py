"""Run records and summary rows for tests, made from the record's declared fields
(core/record.py): every field at a plausible value of an ok cell, a keyword replacing any.

`record(**given)` is a run record as the train job writes one: every field that is not derived,
at its path (the fields under config, fingerprint, hardware and breakdown in those parts), and
the repeats its figures came from; `unmeasured_record(**given)` the same before jobs/combine.py
fills in what the repeats measured. `summary_row(**given)` is a row of summary.csv: every column,
the derived ones as the report works them out. A field added to record.py is in both at its
type's value (VALUES gives it a better one); a keyword that names no field raises TypeError, so
a test of a field that was renamed or removed fails where it builds its cell.

Values follow from each other where the record's do: compute_dtype, baseline, keras_policy,
loss_scaling and float32_layers from the policy,
images_per_sec from the batch size and the step, every interval's ends from its figure, log_se,
df and host_widening; mlflow_run_id names the cell. A cell that did not end ok has none of the
figures its repeats measure (`measured` fields) and no repeats; its reason says how it ended.
"""

from __future__ import annotations

from typing import Any

import mptbench
from mptbench.core import record as declared
from mptbench.core import stats
from mptbench.core.outcomes import Outcome
from mptbench.core.policies import policy_of_record
from mptbench.core.stats import Estimate
from mptbench.report.summary import VALUE_OF

# A field's value where its type's (BY_TYPE) is not a plausible one: an ok float32 cell of
# seed_convnet at batch 8 on a CPU, timed in 3 processes of 4 steps each at 100 ms, its twin
# 95 ms; a model of 4e10 FLOPs per step (0.4 TFLOP/s), trained one epoch on 800 images.
VALUES: dict[str, Any] = {
    "experiment": "unit",
    "machine": "m1",
    "model": "seed_convnet",
    "backend": "tensorflow",
    "dataset": "imagenette2-320",
    "image_size": 32,
    "train_examples": 800,
    "parameters": 1234,
    "builder": None,  # a zoo model: no python builder
    "builder_sha256": None,
    "variant": "pypi",
    "variant_description": "PyPI packages, default settings",
    "backend_description": "Keras on TensorFlow",
    "device": "cpu",
    "policy": "float32",
    "batch_size": 8,
    "outcome": Outcome.OK,
    "ms_per_step": 100.0,
    "ms_per_step_median": 100.0,
    "ms_per_step_p10": 95.0,
    "ms_per_step_p90": 105.0,
    "timed_steps": 12,
    "timed_samples": 12,
    "stopped_by": "steps",
    "speedup_paired": True,
    "synthetic_ms_per_step": 95.0,
    "input_bound_ratio": 100 / 95,
    "input_ms_per_batch": 20.0,
    "input_cpu_ms_per_batch": 25.0,
    "input_bound_ratio_most": None,  # only where no twin ran
    "peak_memory_mb": 300.0,
    "peak_memory_source": "VmHWM",
    "fits_at_batch": True,
    "largest_fit_batch": 64,
    "fits_search_mb": None,  # the device's own
    "parity_verdict": "follows the baseline",
    "parity_end_gap": 0.01,
    "parity_seed_spread": 0.02,
    "parity_skipped_steps": 0,
    "parity_val_accuracy": 0.5,
    "flops_per_step": 4e10,
    "conv_flops_per_step": 3e10,
    "matmul_flops_per_step": 1e10,
    "other_flops_per_step": 1e8,
    "achieved_tflops": 0.4,
    "achieved_tflops_compute": 0.4 / 0.95,
    "peak_tflops": 1.0,
    "mfu": 0.4,
    "mfu_compute": 0.4 / 0.95,
    "calibration": "calibration/cpu.json",
    "profiled_ms_per_step": 110.0,
    "onednn": "on",
    "isa_cap": None,  # no cap
    "kernel_isa": "avx512_core",
    "kernel_isa_own": "avx512_core",
    "kernels": "brg_conv_fwd:avx512_core, brgemm:avx512_core",
    "onednn_isa": "Intel AVX-512 with AVX512BW, AVX512VL, and AVX512DQ extensions",
    "tf_unused_cpu_instructions": None,
    "wheel": None,  # a PyPI variant: no wheel of its own
    "wheel_sha256": None,
    "final_val_accuracy": 0.5,
    "predicted_step_s": 0.1,
    "prediction_error": 0.0,
    "duration_s": 60.0,
    "trainer_cpu_percent": 150.0,
    "cpu_stolen_pct": 0.0,
    "cpu_stolen_pct_most": 0.0,
    "host_widening": 0.0,
    "validation_ms_per_batch": 30.0,
    "validation_first_ms": 500.0,
    "validation_examples": 200,
    # The 2020 experiment's run (a one-epoch timing run's whole run): 20 epochs of 100 steps
    # of 100 ms and 25 validation batches of 30 ms, and 1 s of compiling.
    "fullrun_epochs": 20,
    "fullrun_validates": True,
    "fullrun_source": "the 2020 experiment's",
    "fullrun_s": 216.0,
    "fullrun_steps_s": 200.0,
    "fullrun_validation_s": 15.0,
    "fullrun_first_epoch_s": 1.0,
    # Its epochs' starts: 12 timed, none of which waited (one speed). Its epochs of 10.75 s
    # lie 0.5 s past the tuning thread's wake at 10.23 s, beyond two spreads of 2%: none named.
    "fullrun_epoch_starts_s": 0.0,
    "fullrun_epoch_s": 10.75,
    "fullrun_epoch_spread": 0.02,
    "fullrun_epoch_wait_s": 9.72,
    "fullrun_epoch_wake_s": None,
    "epoch_starts_timed": 12,
    "epoch_starts_waited": 0,
    "started_at": "2026-01-01T00:00:00",
    "tensorflow": "2.21.0",
    "jax": None,  # versions of the frameworks it did not run on
    "jaxlib": None,
    "torch": None,
    "keras": "3.15.1",
    "host": "node01",
    "hardware_id": "test-cpu-9000",
    "mptbench": mptbench.__version__,
    "mlflow_experiment_id": "1",
}
# Where VALUES has no value: a number's or a flag's by its type; a string's its own name, but
# none for a note, a warning or a reason (why something is missing or wrong): an ok cell has none.
BY_TYPE: dict[type, Any] = {int: 1, float: 1.0, bool: False}
UNSAID = ("_note", "_warning", "reason")
INTERVAL = {"log_se": 0.01, "df": 2}  # 3 processes
# The derived columns that compare a cell with its baseline: a baseline's row has only its
# ratios (1) and its own parity figures, as the report gives them.
COMPARED = ("speedup", "memory_vs_baseline", "fullrun_speedup", "parity_")
OF_BASELINE = {"speedup_vs_baseline": 1.0, "memory_vs_baseline": 1.0, "fullrun_speedup": 1.0,
               "parity_verdict": "baseline", "parity_end_gap": 0.0, "parity_seed_spread": 0.02,
               "parity_skipped_steps": 0, "parity_val_accuracy": 0.5}
# A process's figures against the cell's (their geometric mean 1) and the 4 rounds it timed.
LEVELS = (1.01, 0.99, 1 / (1.01 * 0.99))
ROUNDS = 4
CPU = {"model": "Test CPU 9000", "logical_cores": 8, "flags": ["avx", "avx2", "fma"],
       "fast_float16": False, "fast_bfloat16": False}
GPU = {"name": "Tesla T4", "compute_capability": 7.5, "fast_float16": True,
       "fast_bfloat16": False}

# What summarise reads of the device from the fingerprint (report/summary.py hardware).
HARDWARE = {
    "cpu": {"device_name": CPU["model"], "compute_capability": None,
            "fast_float16": CPU["fast_float16"], "fast_bfloat16": CPU["fast_bfloat16"],
            "cpu_flags": " ".join(CPU["flags"])},
    "gpu": {"device_name": GPU["name"], "compute_capability": GPU["compute_capability"],
            "fast_float16": GPU["fast_float16"], "fast_bfloat16": GPU["fast_bfloat16"],
            "cpu_flags": None},
}

RECORD_FIELDS = [f for f in declared.FIELDS if not f.derived]
# A name in VALUES that is no field is one record.py renamed or dropped: mend it here.
_stale = sorted(set(VALUES) - set(declared.COLUMNS))
if _stale:
    raise NameError(f"tests/records.py VALUES: no field {', '.join(_stale)} in core/record.py")
INTERVALS = {f.name.removesuffix("_ci_low") for f in declared.FIELDS
             if f.name.endswith("_ci_low")}


def _default(field: declared.Field) -> Any:
    if field.name in VALUES:
        return VALUES[field.name]
    if field.name.endswith("_log_se") and field.name.removesuffix("_log_se") in INTERVALS:
        return INTERVAL["log_se"]
    if field.name.endswith("_df") and field.name.removesuffix("_df") in INTERVALS:
        return INTERVAL["df"]
    if field.type is str:
        return None if field.name.endswith(UNSAID) else field.name
    return BY_TYPE[field.type]


def _unknown(given: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise TypeError(f"{what}: no field {', '.join(unknown)} in core/record.py")


def _values(given: dict[str, Any]) -> dict[str, Any]:
    """Every record field's value: the given ones, the rest at their default or worked out
    from the others as the record's are."""
    values = {f.name: _default(f) for f in RECORD_FIELDS} | given
    policy = policy_of_record({"policy": values["policy"],
                               "compute_dtype": given.get("compute_dtype"),
                               "baseline": given.get("baseline")})
    follows = {"compute_dtype": policy.compute_dtype, "baseline": policy.baseline,
               "keras_policy": policy.keras_name, "loss_scaling": policy.loss_scaling,
               "float32_layers": " ".join(policy.float32_layers) or None}
    values |= {name: value for name, value in follows.items() if name not in given}
    if "mlflow_run_id" not in given:
        values["mlflow_run_id"] = (
            f"run-{values['device']}-{values['policy']}-{values['batch_size']}")
    if values["outcome"] != Outcome.OK:
        for f in RECORD_FIELDS:
            if f.measured and f.name not in given and f.name != "outcome":
                values[f.name] = None
        if "reason" not in given:
            values["reason"] = f"the cell ended {values['outcome']}"
        return values
    ms, batch = values["ms_per_step"], values["batch_size"]
    if "images_per_sec" not in given and ms and batch:
        values["images_per_sec"] = 1000 * batch / ms
    for prefix in INTERVALS:
        if not declared.BY_NAME[f"{prefix}_ci_low"].derived:
            _interval(values, given, prefix)
    return values


def _interval(values: dict[str, Any], given: dict[str, Any], prefix: str) -> Estimate | None:
    """The interval's ends as record.interval writes them, from the figure, its log_se, df and
    the host's widening (a given end is kept); its estimate, None without one."""
    value = values.get(VALUE_OF.get(prefix, prefix))
    log_se, df = values.get(f"{prefix}_log_se"), values.get(f"{prefix}_df")
    estimate = None
    if value is not None and log_se is not None and df:
        estimate = Estimate(value, df + 1, log_se, df=df,
                            widening=values.get("host_widening") or 0.0)
    for end, name in (("low", f"{prefix}_ci_low"), ("high", f"{prefix}_ci_high")):
        if name not in given:
            values[name] = None if estimate is None else getattr(estimate, end)
    return estimate


def _repeats(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Each process's entry: its steps, its twin's and its whole run at its level of the cell's
    figures, and what each repeat measures (per_repeat fields) at the cell's."""
    if values["outcome"] != Outcome.OK or not values["ms_per_step"]:
        return []
    repeats = []
    for i, level in enumerate(LEVELS):
        ms, twin, whole = (
            None if values[name] is None else values[name] * level
            for name in ("ms_per_step", "synthetic_ms_per_step", "fullrun_s")
        )
        repeats.append({
            "repeat": i + 1, "process": f"p{i}", "outcome": Outcome.OK, "ms_per_step": ms,
            "step_ms": [ms] * ROUNDS, "rounds": list(range(ROUNDS)),
            "synthetic_step_ms": [twin] * ROUNDS if twin else [],
            "synthetic_rounds": list(range(ROUNDS)) if twin else [],
            "fullrun_s": whole, **{name: values[name] for name in declared.PER_REPEAT},
        })
    return repeats


def _merge(into: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def record(**given: Any) -> dict[str, Any]:
    """A run record: every field that is not derived, at its path, `given` by field name; a
    structural part given (config, fingerprint, repeats, ...) is merged into the one the fields
    make, so `config={"train": {"repeats": 3}}` keeps train_epochs."""
    _unknown(given, {f.name for f in RECORD_FIELDS} | set(declared.STRUCTURAL), "record")
    return _record(given, RECORD_FIELDS, repeats=True)


def unmeasured_record(**given: Any) -> dict[str, Any]:
    """A run record as the train job has it before jobs/combine.py fills in what its repeats
    measured: as `record`, without the measured fields and the repeats."""
    fields = [f for f in RECORD_FIELDS if not f.measured]
    _unknown(given, {f.name for f in fields} | set(declared.STRUCTURAL) - {"repeats"},
             "unmeasured record")
    return _record(given, fields, repeats=False)


def _gpu(device: Any) -> bool:
    return not str(device).startswith("cpu")


def _record(given: dict[str, Any], fields: list[declared.Field], repeats: bool) -> dict[str, Any]:
    """`fields` at their paths, in a fingerprint that describes the device; the repeats the
    figures came from; the structural parts given merged in."""
    parts = {k: given.pop(k) for k in list(given) if k in declared.STRUCTURAL}
    values = _values(given)
    out: dict[str, Any] = {"fingerprint": {"cpu": dict(CPU)}}
    if _gpu(values["device"]):
        out["fingerprint"]["gpu"] = dict(GPU)
    if repeats:
        out["repeats"] = _repeats(values)
    for f in fields:
        *path, name = (f.path or f.name).split(".")
        place = out
        for key in path:
            place = place.setdefault(key, {})
        place[name] = values[f.name]
    return _merge(out, parts)


def summary_row(**given: Any) -> dict[str, Any]:
    """A row of summary.csv: every column, `given` by name; the derived ones as the report
    gives them: the hardware from the fingerprint (a Tesla T4 on a device other than the CPU),
    the comparisons with the baseline from their figures (a baseline's row: its ratios 1 and
    nothing else; a cell not ok: none), the speedup's processes and verdict from its
    interval."""
    _unknown(given, set(declared.COLUMNS), "summary row")
    derived = [f for f in declared.FIELDS if f.derived]
    mine = {k: v for k, v in given.items() if declared.BY_NAME[k].derived}
    made = record(**{k: v for k, v in given.items() if k not in mine})
    values = {f.name: _default(f) for f in derived} | {f.name: f.read(made) for f in RECORD_FIELDS}
    values |= HARDWARE["gpu" if _gpu(values["device"]) else "cpu"]
    values["repeats"] = len(made["repeats"]) or None
    values |= mine
    if "speedup_processes" not in mine and values["speedup_df"] is not None:
        values["speedup_processes"] = values["speedup_df"] + 1
    speedup = None
    for prefix in INTERVALS:
        if declared.BY_NAME[f"{prefix}_ci_low"].derived:
            estimate = _interval(values, mine, prefix)
            speedup = estimate if prefix == "speedup" else speedup
    if "speedup_verdict" not in mine:
        values["speedup_verdict"] = None if speedup is None else stats.verdict(speedup)
    ok = values["outcome"] == Outcome.OK
    if not ok or values["baseline"]:
        for f in derived:
            if f.name.startswith(COMPARED) and f.name not in mine:
                values[f.name] = OF_BASELINE.get(f.name) if ok else None
    if not ok:
        values |= {k: None for k in ("peak_tflops", "mfu", "mfu_compute") if k not in mine}
    return {name: values[name] for name in declared.COLUMNS}
