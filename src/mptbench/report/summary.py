"""summary.csv: one row per run record, its columns as record.py describes them, plus what
only several records together say (speedups) and the calibration adds (peaks, MFU)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mptbench import policies as policy_facts
from mptbench.policies import policy_of_record
from mptbench.record import COLUMNS, FIELDS


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


def peaks(calibration: dict[str, Any] | None, dtype: str) -> dict[str, Any]:
    """The measured peak for a compute dtype, and how it compares with float32's."""
    if not calibration or dtype not in policy_facts.DTYPES:
        return {}
    return {
        "peak_tflops": ((calibration.get("matmul") or {}).get(dtype) or {}).get("tflops"),
        "matmul_peak_vs_float32": (calibration.get("matmul_vs_float32") or {}).get(dtype),
        "conv_peak_vs_float32": (calibration.get("conv_vs_float32") or {}).get(dtype),
    }


def row_of(record: dict[str, Any], calibrations: dict) -> dict[str, Any]:
    row = {f.name: f.read(record) for f in FIELDS if not f.derived}
    row["compute_dtype"] = policy_of_record(record).compute_dtype
    row["variant"] = row["variant"] or "default"
    row.update(hardware(record))
    unused = (record.get("fingerprint") or {}).get("tf_unused_cpu_instructions")
    row["tf_unused_cpu_instructions"] = " ".join(unused or []) or None
    calibration = calibrations.get((row["variant"], str(record["device"])))
    row.update(peaks(calibration, row["compute_dtype"]))
    if row.get("peak_tflops") and row.get("achieved_tflops"):
        row["mfu"] = row["achieved_tflops"] / row["peak_tflops"]
    return row


def add_speedup(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """speedup_vs_float32: float32's ms_per_step over this row's for the same keys, both ok."""
    ok = (df["outcome"] == "ok") & (df["ms_per_step"] > 0)
    baseline = (
        df[ok & (df["policy"] == "float32")]
        .groupby(keys)["ms_per_step"]
        .median()
        .rename("_float32_ms")
        .reset_index()
    )
    out = df.merge(baseline, on=keys, how="left")
    out["speedup_vs_float32"] = (out["_float32_ms"] / out["ms_per_step"]).where(ok.to_numpy())
    out.loc[ok.to_numpy() & (out["policy"] == "float32").to_numpy(), "speedup_vs_float32"] = 1.0
    return out.drop(columns="_float32_ms")


def summarise(
    records: list[dict[str, Any]], calibrations: dict[tuple[str, str], dict] | None = None
) -> pd.DataFrame:
    """One row per record, the columns of summary.csv, sorted by variant, device, policy, batch."""
    df = pd.DataFrame([row_of(r, calibrations or {}) for r in records], columns=COLUMNS)
    for f in FIELDS:
        if f.numeric:
            df[f.name] = pd.to_numeric(df[f.name], errors="coerce")
        if f.type is int:  # counts stay integers in the CSV even where a record has none
            df[f.name] = df[f.name].astype("Int64")
    df = add_speedup(df, ["variant", "device", "batch_size"])
    df = df.sort_values(["variant", "device", "policy", "batch_size"], kind="stable")
    return df[COLUMNS].reset_index(drop=True)


def policies(rows: pd.DataFrame) -> list[str]:
    """The policies present, ordered by compute dtype (float32 first), then by name."""
    dtypes = dict(zip(rows["policy"], rows.get("compute_dtype", rows["policy"]), strict=True))
    return policy_facts.order(dtypes)


def groups(summary: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """Our runs per (variant, device), in the summary's order."""
    return [(key, rows) for key, rows in summary.groupby(["variant", "device"], sort=True)]


def speedup_range(rows: pd.DataFrame, policy: str) -> pd.Series:
    """policy's speedups over float32, per batch size where both ran ok."""
    hit = rows[(rows["policy"] == policy) & rows["speedup_vs_float32"].notna()]
    return hit.set_index("batch_size")["speedup_vs_float32"].sort_index()
