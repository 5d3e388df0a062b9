"""summary.csv: one row per run record, its columns as record.py describes them, plus what
only several records together say (speedups and their intervals) and what the calibration
adds (the peak the cell is held to, MFU)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Any

import pandas as pd

from mptbench.core import frameworks, isa, stats
from mptbench.core import policies as policy_facts
from mptbench.core.cells import COMPARISON_AXES, GROUP_AXES
from mptbench.core.hardware import mismatch as hardware_mismatch
from mptbench.core.outcomes import Outcome
from mptbench.core.policies import policy_of_record, weighted_peak
from mptbench.core.record import COLUMNS, FIELDS, interval

# A report group: one model on one Keras backend, with one variant, on one device.
GROUP_KEYS = list(GROUP_AXES)
# The cells a speedup compares: the same group and batch size, another policy.
CELL_KEYS = list(COMPARISON_AXES)


def hardware(record: dict[str, Any]) -> dict[str, Any]:
    """The device's name and what fast math it has, from the fingerprint."""
    fp = record.get("fingerprint") or {}
    cpu, gpu = fp.get("cpu") or {}, fp.get("gpu")
    if gpu:
        cc = gpu.get("compute_capability")
        # Tensor Cores: float16 from compute capability 7.0, bfloat16 from 8.0.
        return {
            "device_name": gpu.get("name"),
            "compute_capability": cc,
            "fast_float16": cc >= 7.0 if cc is not None else gpu.get("fast_float16"),
            "fast_bfloat16": cc >= 8.0 if cc is not None else gpu.get("fast_bfloat16"),
            "cpu_flags": None,
        }
    return {
        "device_name": cpu.get("model"),
        "compute_capability": None,
        "fast_float16": cpu.get("fast_float16"),
        "fast_bfloat16": cpu.get("fast_bfloat16"),
        "cpu_flags": " ".join(cpu.get("flags") or []) or None,
    }


def peaks(calibration: dict[str, Any] | None, dtype: str, row: dict[str, Any]) -> dict[str, Any]:
    """The cell's peak: its convolution FLOPs at the conv peak and its dense FLOPs at the
    matmul peak of its compute dtype (a FLOP-weighted harmonic mean); and MFU against it."""
    if not calibration or dtype not in policy_facts.DTYPES:
        return {}
    out = {
        "matmul_peak_vs_float32": (calibration.get("matmul_vs_float32") or {}).get(dtype),
        "conv_peak_vs_float32": (calibration.get("conv_vs_float32") or {}).get(dtype),
    }
    work = {
        "conv": row.get("conv_flops_per_step") or 0,
        "matmul": row.get("matmul_flops_per_step") or 0,
    }
    peak = weighted_peak(calibration, dtype, work)
    if peak is None:
        return out
    out["peak_tflops"] = peak
    float32 = weighted_peak(calibration, policy_facts.DTYPES[0], work)
    if float32:
        out["peak_vs_float32"] = peak / float32
    return out | _mfu(row, peak)


def _mfu(row: dict[str, Any], peak: float) -> dict[str, Any]:
    """MFU end to end and compute only; none above 1: such a peak is no ceiling."""
    out: dict[str, Any] = {}
    for column, achieved in (
        ("mfu", "achieved_tflops"),
        ("mfu_compute", "achieved_tflops_compute"),
    ):
        if row.get(achieved):
            out[column] = row[achieved] / peak
    over = {k: v for k, v in out.items() if v > 1}
    if over:
        best = max(row.get("achieved_tflops") or 0, row.get("achieved_tflops_compute") or 0)
        out = {"mfu": None, "mfu_compute": None}
        out["peak_note"] = (
            f"calibration too low: this cell reached {best:.3g} TFLOP/s, above the calibrated "
            f"peak of {peak:.3g} TFLOP/s, so no MFU is given"
        )
    return out


def row_of(record: dict[str, Any], calibrations: dict) -> dict[str, Any]:
    row = {f.name: f.read(record) for f in FIELDS if not f.derived}
    policy = policy_of_record(record)
    row["compute_dtype"], row["baseline"] = policy.compute_dtype, policy.baseline
    row["variant"] = row["variant"] or "default"
    row["backend"] = row["backend"] or frameworks.DEFAULT.name  # records from before the axis
    row["repeats"] = len(record.get("repeats") or []) or None
    row.update(hardware(record))
    unused = (record.get("fingerprint") or {}).get("tf_unused_cpu_instructions")
    row["tf_unused_cpu_instructions"] = " ".join(unused or []) or None
    row["kernel_above_cap"] = isa.above(row.get("kernel_isa"), row.get("isa_cap"))
    row["machine"] = row["machine"] or "local"  # records from before machines were an axis
    key = (row["machine"], row["backend"], row["variant"], str(record["device"]))
    calibration = calibrations.get(key)
    row["calibration"] = (calibration or {}).get("file")
    elsewhere = hardware_mismatch(record.get("hardware"), (calibration or {}).get("hardware"),
                                  "its calibration")
    if elsewhere:  # a peak measured on other hardware holds this cell to nothing
        row["peak_note"] = elsewhere.replace("this job landed on", "this cell ran on")
        return row
    row.update(peaks(calibration, row["compute_dtype"], row))
    return row


def timed(record: dict[str, Any], steps: str, rounds: str) -> list[stats.Timed]:
    """A record's ok repeats as (process, steps, rounds): the real run's (step_ms, rounds) or
    the twin's (synthetic_step_ms, synthetic_rounds)."""
    return [
        (r.get("process"), r[steps], r.get(rounds) or [])
        for r in record.get("repeats") or []
        if r.get(steps) and r.get("outcome", Outcome.OK) == Outcome.OK
    ]


def _widening(*records: dict) -> float:
    """What the cells' host slowdowns widen a figure of them by (core/host.py): one cell's
    where they shared their processes, the sum where they did not."""
    return sum(float(r.get("host_widening") or 0.0) for r in records)


def speedup(baseline: dict, other: dict, steps: str, rounds: str):
    """(the other record's speedup over the baseline's, whether it was measured paired):
    paired where the two were timed in the same processes taking turns (core/stats.py), else
    from the processes' medians; None without timed steps on both sides. The paired interval
    is Stein's, as the train job judged it: the spread of the first train.repeats processes
    (the ones planned before any was added for precision), the mean over all; widened where
    the host ran slower than its own in all of them (core/host.py)."""
    base, mine = timed(baseline, steps, rounds), timed(other, steps, rounds)
    first = ((other.get("config") or {}).get("train") or {}).get("repeats")
    paired = stats.paired_speedup(base, mine, first)
    if paired is not None:
        return replace(paired, widening=_widening(other)), True
    if not base or not mine:
        return None, False
    medians = [[statistics.median(s) for _, s, _ in side] for side in (base, mine)]
    unpaired = stats.unpaired_log_ratios(*medians)
    return replace(unpaired, widening=_widening(baseline, other)), False


def fullrun_speedup(baseline: dict, other: dict) -> stats.Estimate | None:
    """The baseline's whole run over the other's (core/fullrun.py), process by process where
    both ran in the same processes: a t interval over them on the logs, widened as the
    speedup is; None where they shared no process with a whole run each."""
    def each(record):
        return {r.get("process"): r.get("fullrun_s") for r in record.get("repeats") or []
                if r.get("fullrun_s") and r.get("outcome", Outcome.OK) == Outcome.OK}

    base, mine = each(baseline), each(other)
    logs = [math.log(base[p] / mine[p]) for p in mine if p in base]
    if not logs:
        return None
    first = ((other.get("config") or {}).get("train") or {}).get("repeats")
    return replace(stats.of_logs(logs, first=first), widening=_widening(other))


# The column an interval's prefix is the interval of, where it is not the prefix itself.
VALUE_OF = {"speedup": "speedup_vs_baseline"}


def estimate_of(row: pd.Series | dict, prefix: str) -> stats.Estimate | None:
    """A row's figure (`prefix`: speedup, ms_per_step, fullrun_s, ...) as summary.csv made
    its interval: the value, the standard error of its mean log, its degrees of freedom and the
    row's host widening (core/host.py), so value·exp(±(t·log_se + widening)) is the CSV's
    interval; at another confidence (`.at`), the same recipe. No interval without a standard
    error; None without a value."""
    value = row.get(VALUE_OF.get(prefix, prefix))
    if value is None or pd.isna(value):
        return None
    log_se, df = row.get(f"{prefix}_log_se"), row.get(f"{prefix}_df")
    if log_se is None or pd.isna(log_se) or df is None or pd.isna(df):
        return stats.Estimate(float(value), 1, None)
    processes = row.get(f"{prefix}_processes")
    n = int(processes) if processes is not None and pd.notna(processes) else int(df) + 1
    widening = row.get("host_widening")
    return stats.Estimate(float(value), n, float(log_se), df=int(df),
                          widening=float(widening) if pd.notna(widening) else 0.0)


def is_baseline(rows: pd.DataFrame) -> pd.Series:
    """Which rows are the baseline policy's (its yaml says baseline: true)."""
    return rows["baseline"].astype("boolean").fillna(False).astype(bool)


def baseline_name(rows: pd.DataFrame) -> str | None:
    """The baseline policy's name among these rows, if one of them is."""
    names = rows.loc[is_baseline(rows), "policy"].unique()
    return str(names[0]) if len(names) else None


def _speedups(df: pd.DataFrame, records: list[dict]) -> pd.DataFrame:
    """Each policy's speedup over the baseline in the same group and at the same batch size,
    end to end and compute only, with 95% intervals over the processes they shared."""
    ok = (df["outcome"] == Outcome.OK) & (df["ms_per_step"] > 0)
    baseline = is_baseline(df)
    base = {
        key: i
        for i, key in zip(df.index, df[CELL_KEYS].itertuples(index=False), strict=True)
        if ok[i] and baseline[i]
    }
    for i in df.index[ok]:
        j = base.get(tuple(df.loc[i, CELL_KEYS]))
        if j is None:
            continue
        if i == j:
            df.at[i, "speedup_vs_baseline"] = 1.0
            if pd.notna(df.at[i, "fullrun_s"]):
                df.at[i, "fullrun_speedup"] = 1.0
            continue
        estimate, paired = speedup(records[j], records[i], "step_ms", "rounds")
        if estimate is not None:
            _put(df, i, "speedup", estimate)
            df.at[i, "speedup_vs_baseline"] = estimate.value
            df.at[i, "speedup_processes"], df.at[i, "speedup_paired"] = estimate.n, paired
            df.at[i, "speedup_verdict"] = stats.verdict(estimate)
        twin, _ = speedup(records[j], records[i], "synthetic_step_ms", "synthetic_rounds")
        if twin is not None:
            _put(df, i, "speedup_compute", twin)
            df.at[i, "speedup_compute"] = twin.value
        whole = fullrun_speedup(records[j], records[i])
        if whole is not None:
            _put(df, i, "fullrun_speedup", whole)
            df.at[i, "fullrun_speedup"] = whole.value
    return df


def _memory_ratio(df: pd.DataFrame) -> pd.DataFrame:
    """Each cell's peak memory over the baseline's at the same batch size (same group)."""
    measured = df["peak_memory_mb"].notna() & is_baseline(df)
    base = df[measured].set_index(CELL_KEYS)["peak_memory_mb"]
    base = base[~base.index.duplicated()]
    keys = pd.MultiIndex.from_frame(df[CELL_KEYS])
    df["memory_vs_baseline"] = df["peak_memory_mb"].to_numpy() / base.reindex(keys).to_numpy()
    return df


def _put(df: pd.DataFrame, i: int, prefix: str, estimate: stats.Estimate) -> None:
    """The interval's ends with its log standard error and degrees of freedom (record.py)."""
    for column, value in interval(prefix, estimate).items():
        if value is not None:
            df.at[i, column] = value


def add_speedup(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """speedup_vs_baseline from medians alone (the published table has no raw steps)."""
    ok = (df["outcome"] == Outcome.OK) & (df["ms_per_step"] > 0)
    baseline = df[ok & is_baseline(df)].groupby(keys)["ms_per_step"].median()
    baseline = baseline.rename("_baseline_ms")
    out = df.merge(baseline.reset_index(), on=keys, how="left")
    out["speedup_vs_baseline"] = (out["_baseline_ms"] / out["ms_per_step"]).where(ok.to_numpy())
    return out.drop(columns="_baseline_ms")


def summarise(
    records: list[dict[str, Any]], calibrations: dict[tuple[str, ...], dict] | None = None
) -> pd.DataFrame:
    """One row per record, the columns of summary.csv, sorted by model, backend, variant,
    device, policy and batch size."""
    df = pd.DataFrame([row_of(r, calibrations or {}) for r in records], columns=COLUMNS)
    for f in FIELDS:
        if f.numeric:
            df[f.name] = pd.to_numeric(df[f.name], errors="coerce")
        if f.type is int:  # counts stay integers in the CSV even where a record has none
            df[f.name] = df[f.name].astype("Int64")
    df["speedup_verdict"] = df["speedup_verdict"].astype(object)
    df["speedup_paired"] = df["speedup_paired"].astype(object)
    df = _speedups(df, records)
    df = _memory_ratio(df)
    df = df.sort_values([*GROUP_KEYS, "policy", "batch_size"], kind="stable")
    return df[COLUMNS].reset_index(drop=True)


def policies(rows: pd.DataFrame) -> list[str]:
    """The policies present: the baseline first, then by compute dtype, then by name."""
    dtypes = rows.get("compute_dtype", rows["policy"])
    facts = zip(rows["policy"], zip(is_baseline(rows), dtypes, strict=True), strict=True)
    return policy_facts.order(dict(facts))


def compared(rows: pd.DataFrame) -> list[str]:
    """The policies present that are compared with the baseline: every other one."""
    base = baseline_name(rows)
    return [p for p in policies(rows) if p != base]


def groups(summary: pd.DataFrame) -> list[tuple[tuple[str, str, str], pd.DataFrame]]:
    """Our runs per (model, backend, variant, device), in the summary's order."""
    return [(key, rows) for key, rows in summary.groupby(GROUP_KEYS, sort=True)]


def speedup_range(rows: pd.DataFrame, policy: str) -> pd.Series:
    """policy's speedups over the baseline, per batch size where both ran ok."""
    hit = rows[(rows["policy"] == policy) & rows["speedup_vs_baseline"].notna()]
    return hit.set_index("batch_size")["speedup_vs_baseline"].sort_index()
