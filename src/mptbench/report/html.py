"""The report's page: index.html from templates/index.html.j2 (Jinja2, autoescaped)."""

from __future__ import annotations

import pandas as pd

from mptbench.config.layout import BREAKDOWN_PLOT
from mptbench.record import RUNS_TABLE
from mptbench.report.breakdown import explain, not_profiled
from mptbench.report.diagnosis import diagnose
from mptbench.report.published import (
    PUBLISHED_CPU_BATCH_SIZE,
    PUBLISHED_CPU_S_PER_STEP,
    compare_with_published,
)
from mptbench.report.summary import groups, policies
from mptbench.report.tables import cell, fmt_ms, plain_table, policy_table
from mptbench.report.variants import variants_section

CSS = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #ccc; }
h3 { margin-bottom: .3rem; } .meta, .note { color: #555; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
small { display: block; color: #777; font-size: .75rem; }
.fail { color: #a40000; font-weight: 600; cursor: help; } .missing { color: #aaa; }
.faster { color: #116611; font-weight: 600; } .slower { color: #a40000; } .same { color: #555; }
img { max-width: 100%; border: 1px solid #eee; }
"""

HOW_TO_READ = (
    "Each table is one TensorFlow variant on one device. Rows are batch sizes; for each dtype "
    "policy a cell gives the median milliseconds per training step (smaller is faster) with its "
    "95% confidence interval beneath it: each cell is timed in train.repeats separate "
    "processes until its median is known to train.precision, and the interval (a bootstrap over "
    "processes, then over steps) covers the variation between processes as well as within one. "
    "\"Speedup vs float32\" is float32's ms/step divided by the policy's at the same batch size, "
    "with its own interval: faster or slower only where the whole interval is above or below 1, "
    'otherwise "no measurable difference". A cell without a timing says why: OOM (out of memory, '
    "on evidence), killed (killed from outside), over budget (a step is, or is clearly predicted "
    "to be, slower than train.max_step_seconds), NaN/Inf (the loss became non-finite) or "
    "unsupported (no kernel for the policy on this device); hover over it for the recorded "
    "reason. The published (2020) numbers follow for comparison."
)


def _unique(series: pd.Series) -> str:
    return ", ".join(str(v) for v in series.dropna().unique()) or "unknown"


def device_label(row: pd.Series) -> str:
    name = row["device_name"] if pd.notna(row["device_name"]) else row["device"]
    if pd.notna(row["compute_capability"]):
        return f"{name} (compute capability {row['compute_capability']:.1f})"
    flags = row["cpu_flags"] if isinstance(row["cpu_flags"], str) else "none recorded"
    return f"{name} (CPU flags: {flags})"


def _accuracy(summary: pd.DataFrame) -> dict | None:
    acc = summary.dropna(subset=["final_val_accuracy"])
    if acc.empty:
        return None
    table = acc.pivot_table(
        index=["variant", "device", "batch_size"],
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


def _published(summary: pd.DataFrame, published: pd.DataFrame) -> dict:
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


def _runs(summary: pd.DataFrame) -> dict:
    runs = summary[RUNS_TABLE].copy()
    runs["ms_per_step"] = runs["ms_per_step"].map(lambda v: v if pd.isna(v) else fmt_ms(v))
    runs["predicted_step_s"] = runs["predicted_step_s"].map(
        lambda v: v if pd.isna(v) else f"{v:.2f}"
    )
    return plain_table(runs)


def _comparison_table(comparison: dict) -> dict:
    head = [cell("op class", "text"), cell("float32", small="ms/step"),
            cell("policy", small="ms/step"), cell("difference", small="ms/step"),
            cell("float32 / policy")]  # fmt: skip
    rows = []
    for r in comparison["rows"]:
        moved = "faster" if r["delta"] < 0 else "slower" if r["delta"] > 0 else None
        rows.append([
            cell(r["name"], "text"), cell(f"{r['float32']:.3g}"), cell(f"{r['policy']:.3g}"),
            cell(f"{r['delta']:+.3g}", moved),
            cell("—" if r["ratio"] is None else f"{r['ratio']:.2f}×"),
        ])  # fmt: skip
    return {"head": head, "rows": rows}


def _breakdown(summary: pd.DataFrame, table: pd.DataFrame) -> dict:
    return {
        "explained": [
            e | {"table": _comparison_table(e["comparison"])} for e in explain(table, summary)
        ],
        "not_profiled": not_profiled(summary, table),
        "plot": BREAKDOWN_PLOT,
    }


def render_html(
    summary: pd.DataFrame, published: pd.DataFrame, plots: list[str], breakdown: pd.DataFrame
) -> str:
    """The whole index.html: our tables and diagnoses, where the time went, accuracy, published
    numbers, plots, runs."""
    import jinja2
    import markupsafe

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mptbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    meta = (
        f"Model {_unique(summary['model'])} on {_unique(summary['dataset'])} at "
        f"{_unique(summary['image_size'])} px; TensorFlow {_unique(summary['tensorflow'])}, "
        f"Keras {_unique(summary['keras'])}; host {_unique(summary['host'])}."
    )
    return env.get_template("index.html.j2").render(
        title=f"Mixed-precision training benchmark: {_unique(summary['experiment'])}",
        css=markupsafe.Markup(CSS),  # our own constant, not data
        meta=meta,
        how_to_read=HOW_TO_READ,
        groups=[
            {
                "variant": variant,
                "device": device,
                "label": device_label(rows.iloc[0]),
                "table": policy_table(rows),
                "diagnosis": diagnose(rows),
            }
            for (variant, device), rows in groups(summary)
        ],  # fmt: skip
        variants=variants_section(summary),
        accuracy=_accuracy(summary),
        published=_published(summary, published),
        plots=[p for p in plots if p != BREAKDOWN_PLOT],
        breakdown=_breakdown(summary, breakdown),
        runs=_runs(summary),
    )
