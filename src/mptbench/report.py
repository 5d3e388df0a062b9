"""Turn run records into summary.csv and index.html: tables, diagnosis, plots, published data."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from mptbench.diagnosis import why

# The published CPU figures (2020): seconds per step at batch size 32, one epoch, float32,
# TensorFlow's PyPI wheel against a source build with AVX2/FMA enabled.
PUBLISHED_CPU_S_PER_STEP = {"PyPI wheel": 321, "source build with AVX2/FMA": 304}
PUBLISHED_CPU_BATCH_SIZE = 32

POLICY_ORDER = ("float32", "mixed_float16", "mixed_bfloat16")
POLICY_DTYPE = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
OUTCOME_WORDS = {
    "ok": "ok",
    "oom": "OOM",
    "over_budget": "over budget",
    "nonfinite": "NaN/Inf",
    "unsupported": "unsupported",
}
REQUIRED_FIELDS = ("device", "policy", "batch_size", "outcome")
SUMMARY_COLUMNS = [
    "experiment",
    "model",
    "dataset",
    "image_size",
    "variant",
    "device",
    "device_name",
    "compute_capability",
    "fast_float16",
    "fast_bfloat16",
    "cpu_flags",
    "policy",
    "batch_size",
    "outcome",
    "reason",
    "ms_per_step",
    "ms_per_step_p10",
    "ms_per_step_p90",
    "images_per_sec",
    "timed_steps",
    "speedup_vs_float32",
    "synthetic_ms_per_step",
    "input_bound_ratio",
    "flops_per_step",
    "achieved_tflops",
    "peak_tflops",
    "mfu",
    "matmul_peak_vs_float32",
    "conv_peak_vs_float32",
    "onednn",
    "xla",
    "tf_unused_cpu_instructions",
    "wheel",
    "wheel_sha256",
    "build_warning",
    "final_val_accuracy",
    "predicted_step_s",
    "duration_s",
    "started_at",
    "tensorflow",
    "keras",
    "host",
    "mlflow_run_id",
]
NUMERIC_COLUMNS = [
    "image_size",
    "compute_capability",
    "batch_size",
    "ms_per_step",
    "ms_per_step_p10",
    "ms_per_step_p90",
    "images_per_sec",
    "timed_steps",
    "final_val_accuracy",
    "predicted_step_s",
    "duration_s",
    "synthetic_ms_per_step",
    "input_bound_ratio",
    "flops_per_step",
    "achieved_tflops",
    "peak_tflops",
    "mfu",
    "matmul_peak_vs_float32",
    "conv_peak_vs_float32",
]


class ReportError(Exception):
    """Something a user must fix before the report can be written; the message is one line."""


def load_records(source: str | Path | list[str | Path]) -> list[dict[str, Any]]:
    """Run records: every *.json under a folder (recursively), or exactly the files listed."""
    if isinstance(source, list | tuple):
        paths = sorted(Path(p) for p in source)
        if not paths:
            raise ReportError("no run records given")
    else:
        runs_dir = Path(source)
        if not runs_dir.is_dir():
            raise ReportError(f"{runs_dir}: no such folder of run records")
        paths = sorted(runs_dir.rglob("*.json"))
        if not paths:
            raise ReportError(f"no run records (*.json) under {runs_dir}")
    records = []
    for path in paths:
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReportError(f"{path}: unreadable run record ({exc})") from None
        if not isinstance(record, dict):
            raise ReportError(f"{path}: not a run record (expected a JSON object)")
        missing = [k for k in REQUIRED_FIELDS if record.get(k) is None]
        if missing:
            raise ReportError(f"{path}: run record lacks {', '.join(missing)}")
        records.append(record)
    return records


def _hardware(record: dict[str, Any]) -> dict[str, Any]:
    fp = record.get("fingerprint") or {}
    cpu, gpu = fp.get("cpu") or {}, fp.get("gpu")
    if gpu:
        cc = gpu.get("compute_capability")
        # Tensor Cores: float16 from compute capability 7.0, bfloat16 from 8.0.
        fast16 = cc >= 7.0 if cc is not None else gpu.get("fast_float16")
        fastbf16 = cc >= 8.0 if cc is not None else gpu.get("fast_bfloat16")
        return {
            "device_name": gpu.get("name"),
            "compute_capability": cc,
            "fast_float16": fast16,
            "fast_bfloat16": fastbf16,
            "cpu_flags": None,
        }
    return {
        "device_name": cpu.get("model"),
        "compute_capability": None,
        "fast_float16": cpu.get("fast_float16"),
        "fast_bfloat16": cpu.get("fast_bfloat16"),
        "cpu_flags": " ".join(cpu.get("flags") or []) or None,
    }


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


def load_calibrations(paths: list[str | Path]) -> dict[tuple[str, str], dict[str, Any]]:
    """The calibrate rule's peaks, keyed by (variant, device)."""
    peaks = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReportError(f"{path}: unreadable calibration ({exc})") from None
        peaks[(str(data.get("variant")), str(data.get("device")))] = data
    return peaks


def _peaks(calibration: dict[str, Any] | None, policy: str) -> dict[str, Any]:
    """The measured peak for the policy's compute dtype, and how it compares with float32."""
    if not calibration:
        return {}
    dtype = POLICY_DTYPE.get(policy, "float32")
    return {
        "peak_tflops": ((calibration.get("matmul") or {}).get(dtype) or {}).get("tflops"),
        "matmul_peak_vs_float32": (calibration.get("matmul_vs_float32") or {}).get(dtype),
        "conv_peak_vs_float32": (calibration.get("conv_vs_float32") or {}).get(dtype),
    }


def summarise(
    records: list[dict[str, Any]], calibrations: dict[tuple[str, str], dict] | None = None
) -> pd.DataFrame:
    """One row per record, the columns of summary.csv, sorted by variant, device, policy, batch."""
    rows = []
    for record in records:
        fp = record.get("fingerprint") or {}
        row = {k: record.get(k) for k in SUMMARY_COLUMNS}
        variant = record.get("variant") or "default"
        row.update(
            _hardware(record),
            tensorflow=fp.get("tensorflow"),
            keras=fp.get("keras"),
            host=fp.get("host"),
            variant=variant,
            onednn=fp.get("onednn"),
            xla=fp.get("xla"),
            tf_unused_cpu_instructions=" ".join(fp.get("tf_unused_cpu_instructions") or []) or None,
        )
        installed = ((record.get("config") or {}).get("variant") or {}).get("installed") or {}
        row.update(
            wheel=installed.get("wheel"),
            wheel_sha256=installed.get("wheel_sha256"),
            build_warning=installed.get("warning"),
        )
        row.update(
            _peaks((calibrations or {}).get((variant, str(record["device"]))), record["policy"])
        )
        if row.get("peak_tflops") and row.get("achieved_tflops"):
            row["mfu"] = row["achieved_tflops"] / row["peak_tflops"]
        rows.append(row)
    df = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for column in NUMERIC_COLUMNS:
        df[column] = pd.to_numeric(df[column], errors="coerce")
    # Counts stay integers in the CSV even where a record has none.
    for column in ("image_size", "batch_size", "timed_steps"):
        df[column] = df[column].astype("Int64")
    df = add_speedup(df, ["variant", "device", "batch_size"])
    df = df.sort_values(["variant", "device", "policy", "batch_size"], kind="stable")
    return df[SUMMARY_COLUMNS].reset_index(drop=True)


def load_published() -> pd.DataFrame:
    """The published (2020) ms/step per device, policy and batch size, with their speedups."""
    with resources.files("mptbench").joinpath("data/seed_results.csv").open() as f:
        df = pd.read_csv(f)
    return add_speedup(df, ["device", "batch_size"])


def policies(rows: pd.DataFrame) -> list[str]:
    """The policies present, float32 first, then the mixed ones in a fixed order."""
    present = set(rows["policy"])
    return [p for p in POLICY_ORDER if p in present] + sorted(present - set(POLICY_ORDER))


def groups(summary: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """Our runs per (variant, device), in the summary's order."""
    return [(key, rows) for key, rows in summary.groupby(["variant", "device"], sort=True)]


def speedup_range(rows: pd.DataFrame, policy: str) -> pd.Series:
    """policy's speedups over float32, per batch size where both ran ok."""
    hit = rows[(rows["policy"] == policy) & rows["speedup_vs_float32"].notna()]
    return hit.set_index("batch_size")["speedup_vs_float32"].sort_index()


def _batches(rows: pd.DataFrame) -> str:
    return ", ".join(str(int(b)) for b in sorted(set(rows["batch_size"])))


def _has(row: pd.Series, key: str, what: str) -> str:
    value = row[key]
    if value is None or pd.isna(value):
        return f"unknown {what}"
    return what if bool(value) else f"no {what}"


def hardware_sentence(row: pd.Series) -> str:
    if all(row[k] is None or pd.isna(row[k]) for k in ("device_name", "fast_float16", "cpu_flags")):
        return f"No hardware fingerprint was recorded for {row['device']}."
    name = row["device_name"] if pd.notna(row["device_name"]) else row["device"]
    if pd.notna(row["compute_capability"]):
        return (
            f"{name} (compute capability {row['compute_capability']:.1f}) has "
            f"{_has(row, 'fast_float16', 'float16 Tensor Cores')} (7.0 or higher) and "
            f"{_has(row, 'fast_bfloat16', 'bfloat16 Tensor Cores')} (8.0 or higher)."
        )
    flags = row["cpu_flags"] if isinstance(row["cpu_flags"], str) else "none recorded"
    # TensorFlow's CPU kernels reach fast float16 only through oneDNN on AMX-FP16, and fast
    # bfloat16 through oneDNN on AMX-BF16 or AVX512_BF16 (AVX512_FP16 alone is not used).
    return (
        f"{name} has {_has(row, 'fast_float16', 'fast float16 math')} (AMX-FP16) and "
        f"{_has(row, 'fast_bfloat16', 'fast bfloat16 math')} (AMX-BF16 or AVX512_BF16) "
        f"for TensorFlow; CPU flags recorded: {flags}."
    )


def diagnose(rows: pd.DataFrame) -> list[str]:
    """Sentences about one (variant, device), every number taken from its rows."""
    first = rows.iloc[0]
    on_cpu = pd.isna(first["compute_capability"])
    sentences = [hardware_sentence(first)]
    has_float32 = (rows["policy"] == "float32").any()
    for policy in policies(rows):
        if policy == "float32":
            continue
        speedups = speedup_range(rows, policy)
        if speedups.empty:
            missing = (
                "float32 and it never both ran ok" if has_float32 else "no float32 run to compare"
            )
            sentences.append(f"{policy}: no speedup to report ({missing} at any batch size).")
            continue
        median = speedups.median()
        verdict = "faster than" if median > 1 else "slower than" if median < 1 else "as fast as"
        where = f"at batch size {int(speedups.index[0])}"
        if len(speedups) > 1:
            where = (
                f"across batch sizes {', '.join(str(int(b)) for b in speedups.index)} "
                f"(range {speedups.min():.2f}×–{speedups.max():.2f}×)"
            )
        sentences.append(
            f"{policy}: median speedup {median:.2f}× over float32 {where}, so "
            f"{verdict} float32 here."
        )
        dtype = POLICY_DTYPE.get(policy, policy)
        # Only a recorded "no" counts: without a fingerprint the hardware is unknown.
        fast = first.get(f"fast_{dtype}")
        fast = True if fast is None or pd.isna(fast) else bool(fast)
        if median < 1 and not fast and on_cpu:
            sentences.append(
                f"This CPU gives TensorFlow no fast {dtype} math, and {policy} ran slower than "
                "float32, as TensorFlow's mixed-precision guide warns for CPUs: on a CPU only "
                "AMX (bfloat16, and float16 with AMX-FP16) speeds mixed precision up."
            )
        elif median < 1 and not fast:
            sentences.append(
                f"This GPU has no {dtype} Tensor Cores, so {policy}'s extra casts "
                "cost more than its reduced precision saves."
            )
    for outcome in ("oom", "over_budget", "nonfinite", "unsupported"):
        hit = rows[rows["outcome"] == outcome]
        if not hit.empty:
            cells = "; ".join(f"{p} at batch {_batches(g)}" for p, g in hit.groupby("policy"))
            word = OUTCOME_WORDS[outcome]
            sentences.append(f"{word[0].upper()}{word[1:]}: {cells}.")
    sentences += why(rows)
    f32_oom = set(rows[(rows["policy"] == "float32") & (rows["outcome"] == "oom")]["batch_size"])
    for policy in policies(rows):
        fit = rows[
            (rows["policy"] == policy)
            & (rows["outcome"] == "ok")
            & rows["batch_size"].isin(f32_oom)
        ]
        if policy != "float32" and not fit.empty:
            sentences.append(
                f"{policy} fit batch {_batches(fit)}, where float32 ran out of memory."
            )
    return sentences


def _percent_range(speedups: pd.Series) -> str:
    """Speedups as percent faster (negative: slower), with the × figures they come from."""
    lo, hi = speedups.min(), speedups.max()
    if f"{lo:.2f}" == f"{hi:.2f}":
        return f"{(lo - 1) * 100:+.0f}% ({lo:.2f}×)"
    return f"{(lo - 1) * 100:+.0f}% to {(hi - 1) * 100:+.0f}% ({lo:.2f}×–{hi:.2f}×)"


def compare_with_published(summary: pd.DataFrame, published: pd.DataFrame) -> str:
    """How our mixed-precision speedups compare with the published ones, from both tables."""
    theirs = []
    for device, rows in published.groupby("device", sort=False):
        s = speedup_range(rows, "mixed_float16")
        if not s.empty:
            theirs.append(f"{_percent_range(s)} on the {device}")
    ours = []
    for (variant, device), rows in groups(summary):
        for policy in policies(rows):
            s = speedup_range(rows, policy)
            if policy != "float32" and not s.empty:
                name = rows["device_name"].iloc[0]
                hardware = f" ({name})" if isinstance(name, str) else ""
                ours.append(f"{policy} {_percent_range(s)} on {variant} · {device}{hardware}")
    text = "Published, mixed_float16 against float32: " + "; ".join(theirs) + ". "
    if ours:
        return text + "Ours: " + "; ".join(ours) + "."
    return text + "Ours: no mixed-precision run and float32 run both ran ok at the same batch size."


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_report(
    runs: str | Path | list[str | Path],
    summary_path: str | Path,
    html_path: str | Path,
    calibrations: list[str | Path] = (),
) -> pd.DataFrame:
    """Read the run records; write summary.csv, index.html and its plots; return the summary.

    Everything is rendered in memory first, so a bad record leaves no output behind.
    """
    # report_html builds on this module's tables, so it is imported here, not at the top.
    from mptbench.report_html import render_html, render_plots

    summary = summarise(load_records(runs), load_calibrations(list(calibrations)))
    published = load_published()
    html_path = Path(html_path)
    plots = render_plots(summary, published)
    page = render_html(summary, published, list(plots))
    try:
        for name, png in plots.items():
            _write_atomic(html_path.parent / name, png)
        _write_atomic(Path(summary_path), summary.to_csv(index=False).encode())
        _write_atomic(html_path, page.encode())
    except OSError as exc:
        raise ReportError(f"cannot write the report: {exc}") from None
    return summary


def main(argv: list[str] | None = None) -> int:
    """The aggregate command line; returns the exit code."""
    parser = argparse.ArgumentParser(
        description="Aggregate run records into summary.csv and index.html."
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", help="folder of run records (*.json, searched recursively)")
    source.add_argument("--records", nargs="+", help="the run records to report, exactly these")
    parser.add_argument("--calibration", nargs="*", default=[], help="calibrate rule outputs")
    parser.add_argument("--summary", required=True, help="summary.csv to write")
    parser.add_argument("--html", required=True, help="index.html to write; plots go beside it")
    args = parser.parse_args(argv)
    try:
        write_report(args.records or args.runs, args.summary, args.html, args.calibration)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
