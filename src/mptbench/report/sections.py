"""The report page's sections as data: device groups, where the time went, backends compared,
accuracy, the published numbers, the runs (Machines compared is machines.py's). html.py renders
them; nothing here writes HTML."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from mptbench.core.links import experiment_link
from mptbench.core.record import RUNS_TABLE
from mptbench.plan.layout import GROUP_PLOTS, LEARNING_PLOT, group_file
from mptbench.report.breakdown import FUNCTION_ROW, PROFILED_ROW, explain, not_profiled
from mptbench.report.diagnosis import diagnose
from mptbench.report.published import (
    PUBLISHED_CPU_BATCH_SIZE,
    PUBLISHED_CPU_S_PER_STEP,
    compare_with_published,
)
from mptbench.report.summary import GROUP_KEYS, groups, policies
from mptbench.report.tables import (
    backends_table,
    cell,
    fmt_ms,
    plain_table,
    policy_table,
)
from mptbench.report.thresholds import OUTSIDE_NOTED

PLOT_ALT = {
    "ms_per_step.png": "mean ms per step against batch size, per policy, with 95% intervals",
    "speedup.png": "speedup over the baseline against batch size, with the published speedups",
    "tflops.png": "achieved TFLOP/s against batch size, with the calibrated peaks",
    "breakdown.png": "milliseconds per step by op class, per batch size and policy",
}


def unique(series: pd.Series) -> str:
    return ", ".join(str(v) for v in series.dropna().unique()) or "unknown"


def device_label(row: pd.Series) -> str:
    name = row["device_name"] if pd.notna(row["device_name"]) else row["device"]
    if pd.notna(row["compute_capability"]):
        return f"{name} (compute capability {row['compute_capability']:.1f})"
    flags = row["cpu_flags"] if isinstance(row["cpu_flags"], str) else "none recorded"
    return f"{name} (CPU flags: {flags})"


def accuracy(summary: pd.DataFrame) -> dict | None:
    acc = summary.dropna(subset=["final_val_accuracy"])
    if acc.empty:
        return None
    table = acc.pivot_table(
        index=[*GROUP_KEYS, "batch_size"],
        columns="policy",
        values="final_val_accuracy",
        aggfunc="last",
    )
    table = table[policies(acc)].map(lambda v: "—" if pd.isna(v) else f"{v:.3f}")
    medians = "; ".join(
        f"{p}: median {g.median():.3f} over {len(g)} runs"
        for p, g in acc.groupby("policy")["final_val_accuracy"]
    )
    return {"medians": medians, "table": plain_table(table.reset_index())}


def published_section(summary: pd.DataFrame, published: pd.DataFrame) -> dict:
    devices = []
    for device, rows in published.groupby("device", sort=False):
        first = rows.iloc[0]
        title = (
            f"{device} (compute capability {first['compute_capability']:.1f}, "
            f"{int(first['memory_gb'])} GB)"
        )
        devices.append({"title": title, "table": policy_table(rows)})
    wheel, source = PUBLISHED_CPU_S_PER_STEP.values()
    cpu = pd.DataFrame(
        {"build": list(PUBLISHED_CPU_S_PER_STEP), "s/step": list(PUBLISHED_CPU_S_PER_STEP.values())}
    )
    return {
        "comparison": compare_with_published(summary, published),
        "devices": devices,
        "cpu_batch_size": PUBLISHED_CPU_BATCH_SIZE,
        "cpu_table": plain_table(cpu),
        "cpu_ratio": f"{wheel / source:.2f}×",
    }


def run_link(ui_url: str | None, experiment_id, run_id) -> str | None:
    """The run's page in the MLflow UI, in its model-training view."""
    if not ui_url or not isinstance(run_id, str) or pd.isna(experiment_id):
        return None
    return experiment_link(ui_url, experiment_id, f"/runs/{run_id}")


def runs(summary: pd.DataFrame, ui_url: str | None) -> dict:
    """Every run, its MLflow run id shortened and linked to the run in the MLflow UI."""
    shown = summary[RUNS_TABLE].copy()
    shown["ms_per_step"] = shown["ms_per_step"].map(lambda v: v if pd.isna(v) else fmt_ms(v))
    shown["predicted_step_s"] = shown["predicted_step_s"].map(
        lambda v: v if pd.isna(v) else f"{v:.2f}"
    )
    table = plain_table(shown)
    column = RUNS_TABLE.index("mlflow_run_id")
    table["head"][column]["text"] = "MLflow run"
    for row, (_, record) in zip(table["rows"], summary.iterrows(), strict=True):
        run_id = record["mlflow_run_id"]
        if isinstance(run_id, str):
            href = run_link(ui_url, record.get("mlflow_experiment_id"), run_id)
            row[column] = cell(run_id[:8], "text", title=run_id, href=href)
    return table


def _moved(delta: float) -> str | None:
    """A difference cell's class: faster where the policy took less, slower where more."""
    return "faster" if delta < 0 else "slower" if delta > 0 else None


def comparison_table(explained: dict) -> dict:
    """One policy against the baseline, class by class, then the profiled and the timed step."""
    base, policy = explained["baseline"], explained["policy"]
    unit = "ms of the profiled step"
    head = [cell("class", "text"), cell(base, small=unit), cell(policy, small=unit),
            cell("difference", small="ms"), cell(f"{base} / {policy}")]
    rows = []
    for r in explained["comparison"]["rows"]:
        moved = _moved(r["delta"])
        rows.append([
            cell(r["name"], "text"), cell(f"{r['baseline']:.3g}"), cell(f"{r['policy']:.3g}"),
            cell(f"{r['delta']:+.3g}", moved),
            cell("—" if r["ratio"] is None else f"{r['ratio']:.2f}×"),
        ])
    return {"head": head, "rows": rows}


def layer_type_table(explained: dict, most: int = 8) -> dict | None:
    """The layer types that moved most between the baseline and the policy (layers.csv by
    type): how many layers, their ms under each, the difference and the class that moved most
    in them; None where the cells were not profiled by layer."""
    types = explained.get("layer_types") or []
    if not types:
        return None
    base, policy = explained["baseline"], explained["policy"]
    unit = "ms of the profiled step"
    head = [cell("layer type", "text"), cell("layers"), cell(base, small=unit),
            cell(policy, small=unit), cell("difference", small="ms"),
            cell("moved most", "text", small="op class, ms")]
    rows = []
    for t in types[:most]:
        moved = _moved(t["delta"])
        rows.append([
            cell(t["layer_type"], "text"), cell(str(t["layers"])), cell(f"{t['baseline']:.3g}"),
            cell(f"{t['policy']:.3g}"), cell(f"{t['delta']:+.3g}", moved),
            cell(f"{t['class']} {t['class_delta']:+.3g}", "text"),
        ])
    return {"head": head, "rows": rows}


def closure_text(explained: dict) -> str | None:
    """'The measured classes account for 96% (float32) and 98% (mixed_float16) of the profiled
    step.', or None where no closure was computed (a GPU's profile)."""
    policies = (explained["baseline"], explained["policy"])
    closures = zip(explained["comparison"]["closure"], policies, strict=True)
    shown = [f"{c:.0%} ({p})" for c, p in closures if c is not None]
    if not shown:
        return None
    text = f"The measured classes account for {' and '.join(shown)} of the profiled step."
    rows = {r["name"]: r for r in explained["comparison"]["rows"]}
    inside, step = rows.get(FUNCTION_ROW), rows[PROFILED_ROW]
    if inside is None:
        return text
    parts = [(inside[side], step[side], p) for side, p in zip(("baseline", "policy"), policies,
                                                                  strict=True)]
    if all(i >= OUTSIDE_NOTED * s for i, s, _ in parts):
        return text
    took = " and ".join(f"{fmt_ms(i)} of {fmt_ms(s)} ms ({p})" for i, s, p in parts)
    return (f"{text} Keras' train function took {took}: the rest is Python and callbacks "
            "around it, which a busy machine makes longer.")


@dataclass
class Extra:
    """What the report has besides the run records: the fits searches (report/fits.py) and
    the parity comparisons (report/parity.py), as sections."""

    fits: dict | None = None
    learning: list[dict] = field(default_factory=list)

    def of(self, key: tuple) -> dict:
        title = " · ".join(key)
        fits = next((g for g in (self.fits or {}).get("groups", []) if g["title"] == title), None)
        learning = next((g for g in self.learning if g["title"] == title), None)
        return {"fits": fits, "learning": learning}


def group(
    key: tuple, rows: pd.DataFrame, breakdown: pd.DataFrame, extra: Extra | None = None,
    layers: pd.DataFrame | None = None,
) -> dict:
    """One (model, backend, variant, device): its table, plots, where its time went (by class,
    and by layer type where layers.csv has its cells), its diagnosis, what fits and whether it
    still learns."""
    mine = breakdown[(breakdown[GROUP_KEYS] == pd.Series(key, index=GROUP_KEYS)).all(axis=1)]
    return {
        **(extra or Extra()).of(key),
        "learning_plot": group_file(key, LEARNING_PLOT),
        **dict(zip(GROUP_KEYS, key, strict=True)),
        "label": device_label(rows.iloc[0]),
        "table": policy_table(rows),
        "plots": [{"src": group_file(key, p), "alt": PLOT_ALT[p]} for p in GROUP_PLOTS],
        "explained": [
            e | {"table": comparison_table(e), "closure": closure_text(e),
                 "layer_table": layer_type_table(e)}
            for e in explain(mine, rows, layers)
        ],
        "not_profiled": not_profiled(rows, mine),
        "diagnosis": diagnose(rows),
    }


def backends(summary: pd.DataFrame) -> list[dict]:
    """Per model, variant and device (of one machine) run on several backends: the backends
    side by side."""
    out = []
    keys = ["machine", "model", "variant", "device"]
    for (machine, model, variant, device), rows in summary.groupby(keys):
        if rows["backend"].nunique() >= 2:
            where = f"{device} of {machine}" if summary["machine"].nunique() > 1 else device
            title = f"{model} · {variant} · {where}: {device_label(rows.iloc[0])}"
            said = rows.drop_duplicates("backend").dropna(subset=["backend_description"])
            if not said.empty:
                title += " (" + "; ".join(
                    f"{r.backend}: {r.backend_description}" for r in said.itertuples()) + ")"
            out.append({"title": title, "table": backends_table(rows)})
    return out


def all_groups(
    summary: pd.DataFrame, breakdown: pd.DataFrame, extra: Extra | None = None,
    layers: pd.DataFrame | None = None,
) -> list[dict]:
    return [group(key, rows, breakdown, extra, layers) for key, rows in groups(summary)]
