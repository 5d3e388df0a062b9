"""Render the report's page (self-contained HTML) and its ms/step plots from the summary tables."""

from __future__ import annotations

import io
import math
from functools import partial
from html import escape

import matplotlib
import pandas as pd

matplotlib.use("Agg")  # cluster nodes have no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from mptbench.report import (  # noqa: E402
    OUTCOME_WORDS,
    PUBLISHED_CPU_BATCH_SIZE,
    PUBLISHED_CPU_S_PER_STEP,
    compare_with_published,
    diagnose,
    groups,
    policies,
)
from mptbench.report_variants import speedup_cell, variants_section  # noqa: E402

PLOT = "ms_per_step.png"
PUBLISHED_PLOT = "published_ms_per_step.png"
POLICY_COLOR = {"float32": "C0", "mixed_float16": "C1", "mixed_bfloat16": "C2"}

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
.faster { color: #116611; font-weight: 600; } .slower { color: #a40000; }
img { max-width: 100%; border: 1px solid #eee; }
"""

HOW_TO_READ = (
    "Each table is one TensorFlow variant on one device. Rows are batch sizes; for each dtype "
    "policy a cell gives the median milliseconds per training step (smaller is faster) with the "
    '10th–90th percentile of the timed steps beneath it. "Speedup vs float32" is float32\'s '
    "ms/step divided by the policy's at the same batch size: above 1 means mixed precision was "
    "faster. A cell without a timing says why: OOM (the device ran out of memory), over budget "
    "(a probe predicted a step slower than train.max_step_seconds, so it was skipped), NaN/Inf "
    "(the loss became non-finite) or unsupported (no kernel for the policy on this device); hover "
    "over it for the recorded reason. The published (2020) numbers follow for comparison."
)


def fmt_ms(value: float) -> str:
    if float(value).is_integer() or value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def text(value) -> str:
    """A value for a table cell, escaped; missing values as a dash."""
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return "—"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return escape(str(value))


def _unique(series: pd.Series) -> str:
    return ", ".join(str(v) for v in series.dropna().unique()) or "unknown"


def device_label(row: pd.Series) -> str:
    name = row["device_name"] if pd.notna(row["device_name"]) else row["device"]
    if pd.notna(row["compute_capability"]):
        return f"{name} (compute capability {row['compute_capability']:.1f})"
    flags = row["cpu_flags"] if isinstance(row["cpu_flags"], str) else "none recorded"
    return f"{name} (CPU flags: {flags})"


def policy_table(rows: pd.DataFrame) -> str:
    """Rows batch size; per policy ms/step, and per mixed policy its speedup over float32."""
    pols = policies(rows)
    keys = ["batch_size", "policy"]
    cells = rows.drop_duplicates(keys, keep="last").set_index(keys)
    head = ["<th>batch size</th>"]
    for p in pols:
        head.append(f"<th>{escape(p)}<small>ms/step</small></th>")
        if p != "float32":
            head.append(f"<th>{escape(p)}<small>speedup vs float32</small></th>")
    body = []
    for batch_size in sorted(set(rows["batch_size"])):
        tds = [f"<td>{int(batch_size)}</td>"]
        for p in pols:
            cell = cells.loc[(batch_size, p)] if (batch_size, p) in cells.index else None
            tds.append(_ms_cell(cell))
            if p != "float32":
                tds.append(speedup_cell(None if cell is None else cell["speedup_vs_float32"]))
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><tr>{''.join(head)}</tr>\n" + "\n".join(body) + "</table>"


def _ms_cell(cell: pd.Series | None) -> str:
    if cell is None:
        return '<td class="missing" title="not run">—</td>'
    if cell["outcome"] != "ok" or pd.isna(cell["ms_per_step"]):
        word = OUTCOME_WORDS.get(cell["outcome"], str(cell["outcome"]))
        reason = cell.get("reason")
        title = escape(str(reason)) if isinstance(reason, str) else escape(word)
        return f'<td class="fail" title="{title}">{escape(word)}</td>'
    spread = ""
    if pd.notna(cell.get("ms_per_step_p10")) and pd.notna(cell.get("ms_per_step_p90")):
        p10, p90 = fmt_ms(cell["ms_per_step_p10"]), fmt_ms(cell["ms_per_step_p90"])
        spread = f"<small>p10–p90: {p10}–{p90}</small>"
    return f"<td>{fmt_ms(cell['ms_per_step'])}{spread}</td>"


def _plain_table(df: pd.DataFrame) -> str:
    head = "".join(f'<th class="text">{escape(str(c))}</th>' for c in df.columns)
    body = "\n".join(
        "<tr>" + "".join(f'<td class="text">{text(v)}</td>' for v in row) + "</tr>"
        for row in df.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>\n{body}</table>"


def accuracy_section(summary: pd.DataFrame) -> str:
    acc = summary.dropna(subset=["final_val_accuracy"])
    if acc.empty:
        return (
            "<p>No run recorded a final validation accuracy "
            "(validation was off or no run finished).</p>"
        )
    table = acc.pivot_table(
        index=["variant", "device", "batch_size"],
        columns="policy",
        values="final_val_accuracy",
        aggfunc="last",
    )
    table = table[[p for p in policies(acc)]].map(lambda v: "—" if pd.isna(v) else f"{v:.3f}")
    medians = "; ".join(
        f"{p}: median {g.median():.3f} over {len(g)} runs"
        for p, g in acc.groupby("policy")["final_val_accuracy"]
    )
    return f"<p>{escape(medians)}.</p>" + _plain_table(table.reset_index())


def published_section(summary: pd.DataFrame, published: pd.DataFrame) -> str:
    parts = [
        "<h2>Published (2020)</h2>",
        f"<p>{escape(compare_with_published(summary, published))}</p>",
    ]
    for device, rows in published.groupby("device", sort=False):
        first = rows.iloc[0]
        parts.append(
            f"<h3>{escape(str(device))} (compute capability "
            f"{first['compute_capability']:.1f}, {int(first['memory_gb'])} GB)</h3>"
        )
        parts.append(policy_table(rows))
    wheel, source = PUBLISHED_CPU_S_PER_STEP.values()
    cpu = pd.DataFrame(
        {"build": list(PUBLISHED_CPU_S_PER_STEP), "s/step": list(PUBLISHED_CPU_S_PER_STEP.values())}
    )
    parts.append(f"<h3>CPU, float32, batch size {PUBLISHED_CPU_BATCH_SIZE}, one epoch</h3>")
    parts.append(_plain_table(cpu))
    parts.append(
        f'<p class="note">The source build was {wheel / source:.2f}× the speed of the '
        "PyPI wheel on the published CPU.</p>"
    )
    return "\n".join(parts)


def render_html(summary: pd.DataFrame, published: pd.DataFrame, plots: list[str]) -> str:
    """The whole index.html: our tables and diagnoses, accuracy, published numbers, plots, runs."""
    title = f"Mixed-precision training benchmark: {_unique(summary['experiment'])}"
    meta = (
        f"Model {_unique(summary['model'])} on {_unique(summary['dataset'])} at "
        f"{_unique(summary['image_size'])} px; TensorFlow "
        f"{_unique(summary['tensorflow'])}, Keras {_unique(summary['keras'])}; "
        f"host {_unique(summary['host'])}."
    )
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">{escape(meta)}</p>',
        f"<p>{escape(HOW_TO_READ)}</p>",
    ]
    for (variant, device), rows in groups(summary):
        label = device_label(rows.iloc[0])
        parts.append(f"<h2>{escape(variant)} · {escape(device)}: {escape(label)}</h2>")
        parts.append(policy_table(rows))
        parts.append("<p><b>Diagnosis.</b> " + " ".join(escape(s) for s in diagnose(rows)) + "</p>")
    parts.append(variants_section(summary))
    parts += ["<h2>Final validation accuracy</h2>", accuracy_section(summary)]
    parts.append(published_section(summary, published))
    parts.append("<h2>ms/step against batch size</h2>")
    parts += [
        f'<p><img src="{escape(name)}" alt="median ms per step against batch size"></p>'
        for name in plots
    ]
    runs = summary[
        [
            "variant",
            "device",
            "policy",
            "batch_size",
            "outcome",
            "reason",
            "ms_per_step",
            "timed_steps",
            "predicted_step_s",
            "mlflow_run_id",
            "host",
        ]
    ].copy()
    runs["ms_per_step"] = runs["ms_per_step"].map(lambda v: v if pd.isna(v) else fmt_ms(v))
    runs["predicted_step_s"] = runs["predicted_step_s"].map(
        lambda v: v if pd.isna(v) else f"{v:.2f}"
    )
    parts += ["<h2>Runs</h2>", _plain_table(runs), "</body></html>\n"]
    return "\n".join(parts)


def _minor_label(ax, value: float, _position) -> str:
    """Plain numbers on a log axis; over more than a decade only 2, 3 and 5 (others would crowd)."""
    low, high = ax.get_ylim()
    mantissa = round(value / 10 ** math.floor(math.log10(value)))
    return f"{value:g}" if high / low < 10 or mantissa in (2, 3, 5) else ""


def _figure(panels: list[tuple[str, pd.DataFrame]], title: str) -> bytes:
    ncols = min(len(panels), 3)
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.8 * nrows), squeeze=False)
    for ax, (label, rows) in zip(axes.flat, panels, strict=False):
        ok = rows[(rows["outcome"] == "ok") & (rows["ms_per_step"] > 0)]
        batch_sizes = sorted(int(b) for b in set(rows["batch_size"]))
        ax.set_xscale("log", base=2)
        ax.set_xlim(batch_sizes[0] / 1.4, batch_sizes[-1] * 1.4)
        ax.set_xticks(batch_sizes, [str(b) for b in batch_sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        # Cells without a timing are named along the bottom, so a gap is not mistaken for no run.
        bottom = blended_transform_factory(ax.transData, ax.transAxes)
        for i, p in enumerate(policies(rows)):
            color = POLICY_COLOR.get(p, f"C{3 + i}")
            points = ok[ok["policy"] == p].sort_values("batch_size")
            if not points.empty:
                ax.plot(
                    points["batch_size"], points["ms_per_step"], marker="o", label=p, color=color
                )
            for _, cell in rows[(rows["policy"] == p) & ~rows.index.isin(ok.index)].iterrows():
                word = OUTCOME_WORDS.get(cell["outcome"], str(cell["outcome"]))
                ax.text(
                    cell["batch_size"],
                    0.03 + 0.07 * i,
                    word,
                    transform=bottom,
                    color=color,
                    ha="center",
                    fontsize=7,
                )
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("batch size")
        ax.set_ylabel("ms/step (median)")
        if ok.empty:
            ax.text(0.5, 0.5, "no run finished ok", transform=ax.transAxes, ha="center")
            ax.set_yticks([])
            continue
        ax.set_yscale("log")
        if len(ok) < len(rows):
            # Room under the lowest point for the words naming cells without a timing.
            low, high = ax.get_ylim()
            ax.set_ylim(low / (high / low) ** 0.25, high)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(partial(_minor_label, ax)))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _short_name(row: pd.Series) -> str:
    """The device's name without its flags: a plot title has room for little more."""
    return device_label(row).split(" (CPU flags:")[0][:50]


def render_plots(summary: pd.DataFrame, published: pd.DataFrame) -> dict[str, bytes]:
    """PNG bytes by file name: our runs per (variant, device), and the published devices."""
    ours = [
        (f"{variant} · {device}\n{_short_name(rows.iloc[0])}", rows)
        for (variant, device), rows in groups(summary)
    ]
    theirs = [(str(device), rows) for device, rows in published.groupby("device", sort=False)]
    return {PLOT: _figure(ours, "Our runs"), PUBLISHED_PLOT: _figure(theirs, "Published (2020)")}
