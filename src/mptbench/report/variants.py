"""The report's TensorFlow-variant comparison: ms/step per variant and its speedup vs pypi."""

from __future__ import annotations

import pandas as pd

from mptbench.core.outcomes import Outcome
from mptbench.report.tables import cell, fmt_ms, plain_table, speedup_cell

BASELINE = "pypi"
SETTINGS = ["wheel", "tensorflow", "onednn", "xla", "tf_unused_cpu_instructions", "build_warning"]


def variant_speedups(summary: pd.DataFrame) -> pd.DataFrame:
    """speedup_vs_pypi: pypi's ms/step over each variant's, same device, policy and batch size."""
    ok = summary[(summary["outcome"] == Outcome.OK) & (summary["ms_per_step"] > 0)]
    keys = ["machine", "model", "backend", "device", "policy", "batch_size"]
    base = ok[ok["variant"] == BASELINE].groupby(keys)["ms_per_step"].median().rename("_pypi_ms")
    out = ok.merge(base.reset_index(), on=keys, how="left")
    out["speedup_vs_pypi"] = out["_pypi_ms"] / out["ms_per_step"]
    return out.drop(columns="_pypi_ms")


def _table(rows: pd.DataFrame, variants: list[str]) -> dict:
    head = [cell("batch size")]
    for v in variants:
        head.append(cell(v, small="ms/step"))
        head += [] if v == BASELINE else [cell(v, small=f"vs {BASELINE}")]
    body = []
    for batch_size in sorted(set(rows["batch_size"])):
        tds = [cell(int(batch_size))]
        for v in variants:
            hit = rows[(rows["batch_size"] == batch_size) & (rows["variant"] == v)]
            if hit.empty:
                tds += [cell("—", "missing")] * (1 if v == BASELINE else 2)
                continue
            tds.append(cell(fmt_ms(hit.iloc[-1]["ms_per_step"])))
            tds += [] if v == BASELINE else [speedup_cell(hit.iloc[-1]["speedup_vs_pypi"])]
        body.append(tds)
    return {"head": head, "rows": body}


def variants_section(summary: pd.DataFrame) -> dict | None:
    """Per device and policy, TensorFlow's variants side by side; None with a single one."""
    summary = summary[summary["backend"] == "tensorflow"]
    variants = list(dict.fromkeys(summary["variant"]))
    if len(variants) < 2:
        return None
    variants = sorted(variants, key=lambda v: (v != BASELINE, v))
    speedups = variant_speedups(summary)
    columns = [c for c in SETTINGS if c in summary.columns]
    settings = summary.drop_duplicates("variant", keep="last")[["variant", *columns]]
    warnings = summary["build_warning"].dropna().unique() if "build_warning" in summary else []
    return {
        "baseline": BASELINE,
        "settings": plain_table(settings),
        "tables": [
            {
                "title": f"{model} on {device} of {machine} · {policy}",
                "table": _table(rows, variants),
            }
            for (machine, model, device, policy), rows in speedups.groupby(
                ["machine", "model", "device", "policy"], sort=True
            )
        ],
        "warnings": [str(w) for w in warnings],
    }
