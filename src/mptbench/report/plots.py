"""The report's plots: ms/step against batch size (ours the mean step), ours and the published
ones."""

from __future__ import annotations

import io
import math
from functools import partial

import matplotlib
import pandas as pd

matplotlib.use("Agg")  # cluster nodes have no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from mptbench.core.opclasses import CLASSES, STEP_CLASSES  # noqa: E402
from mptbench.core.outcomes import WORDS, Outcome  # noqa: E402
from mptbench.plan.layout import PUBLISHED_PLOT, group_file  # noqa: E402
from mptbench.report.published import PUBLISHED_MIXED  # noqa: E402
from mptbench.report.summary import (  # noqa: E402
    GROUP_KEYS,
    baseline_name,
    compared,
    groups,
    policies,
)


def colors(rows: pd.DataFrame) -> dict[str, str]:
    """A colour per policy, in the policies' order (the baseline's first)."""
    return {p: f"C{i % 10}" for i, p in enumerate(policies(rows))}


def _minor_label(ax, value: float, _position) -> str:
    """Plain numbers on a log axis; over more than a decade only 2, 3 and 5 (others would crowd)."""
    low, high = ax.get_ylim()
    mantissa = round(value / 10 ** math.floor(math.log10(value)))
    return f"{value:g}" if high / low < 10 or mantissa in (2, 3, 5) else ""


def _batch_axis(ax, rows: pd.DataFrame) -> None:
    batch_sizes = sorted(int(b) for b in set(rows["batch_size"]))
    ax.set_xscale("log", base=2)
    ax.set_xlim(batch_sizes[0] / 1.4, batch_sizes[-1] * 1.4)
    ax.set_xticks(batch_sizes, [str(b) for b in batch_sizes])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch size")
    ax.set_ylabel("ms per step")


def _policy_lines(ax, rows: pd.DataFrame, ok: pd.DataFrame) -> None:
    # Cells without a timing are named along the bottom, so a gap is not mistaken for no run.
    bottom = blended_transform_factory(ax.transData, ax.transAxes)
    for i, (p, color) in enumerate(colors(rows).items()):
        points = ok[ok["policy"] == p].sort_values("batch_size")
        if not points.empty:
            ms = points["ms_per_step"]
            # The published table has no intervals: no bars there.
            low = (ms - points.get("ms_per_step_ci_low", ms)).fillna(0).clip(lower=0)
            high = (points.get("ms_per_step_ci_high", ms) - ms).fillna(0).clip(lower=0)
            ax.errorbar(points["batch_size"], ms, yerr=[low, high], marker="o", capsize=3,
                        label=f"{p} (95% CI)", color=color)
        for _, row in rows[(rows["policy"] == p) & ~rows.index.isin(ok.index)].iterrows():
            word = WORDS.get(row["outcome"], str(row["outcome"]))
            ax.text(
                row["batch_size"], 0.03 + 0.07 * i, word, transform=bottom, color=color,
                ha="center", fontsize=7,
            )


def _time_axis(ax, rows: pd.DataFrame, ok: pd.DataFrame) -> None:
    ax.set_yscale("log")
    if len(ok) < len(rows):
        # Room under the lowest point for the words naming cells without a timing.
        low, high = ax.get_ylim()
        ax.set_ylim(low / (high / low) ** 0.25, high)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(partial(_minor_label, ax)))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def _panel(ax, label: str, rows: pd.DataFrame) -> None:
    ok = rows[(rows["outcome"] == Outcome.OK) & (rows["ms_per_step"] > 0)]
    _batch_axis(ax, rows)
    _policy_lines(ax, rows, ok)
    ax.set_title(label, fontsize=9)
    if ok.empty:
        ax.text(0.5, 0.5, "no run finished ok", transform=ax.transAxes, ha="center")
        ax.set_yticks([])
    else:
        _time_axis(ax, rows, ok)


def _figure(panels: list[tuple[str, pd.DataFrame]], title: str) -> bytes:
    ncols = min(len(panels), 3)
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.8 * nrows), squeeze=False)
    for ax, (label, rows) in zip(axes.flat, panels, strict=False):
        _panel(ax, label, rows)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    return png(fig)


def png(fig) -> bytes:
    """A figure as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def ms_per_step_figure(rows: pd.DataFrame, title: str) -> bytes:
    """Mean ms/step against batch size per policy, with 95% interval bars."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    _panel(ax, title, rows)
    fig.tight_layout()
    return png(fig)


def _speedup_lines(ax, rows: pd.DataFrame) -> None:
    palette = colors(rows)
    for p in compared(rows):
        hit = rows[(rows["policy"] == p) & rows["speedup_vs_baseline"].notna()]
        hit = hit.sort_values("batch_size")
        if hit.empty:
            continue
        low = (hit["speedup_vs_baseline"] - hit["speedup_ci_low"]).fillna(0).clip(lower=0)
        high = (hit["speedup_ci_high"] - hit["speedup_vs_baseline"]).fillna(0).clip(lower=0)
        color = palette[p]
        ax.errorbar(hit["batch_size"], hit["speedup_vs_baseline"], yerr=[low, high], marker="o",
                    capsize=3, label=f"{p} (ours, 95% CI)", color=color)


def speedup_figure(rows: pd.DataFrame, published: pd.DataFrame, title: str) -> bytes:
    """Speedup over the baseline against batch size, ours with intervals, the published
    dashed."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    _speedup_lines(ax, rows)
    for i, (device, theirs) in enumerate(published.groupby("device", sort=False)):
        mixed = theirs[theirs["policy"] == PUBLISHED_MIXED]
        hit = mixed[mixed["speedup_vs_baseline"].notna()]
        ax.plot(hit["batch_size"], hit["speedup_vs_baseline"], linestyle="--", marker=".",
                color=f"C{6 + i}", alpha=0.8,
                label=f"{PUBLISHED_MIXED}, {device} (2020)")
    ax.axhline(1.0, color="0.4", linewidth=1)
    ax.set_xscale("log", base=2)
    sizes = sorted(int(b) for b in set(rows["batch_size"]) | set(published["batch_size"]))
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch size")
    ax.set_ylabel(f"speedup over {baseline_name(rows)} (×, above 1: faster)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def tflops_figure(rows: pd.DataFrame, title: str) -> bytes:
    """Achieved TFLOP/s (end to end, compute only) per policy against its calibrated peak."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ok = rows[rows["outcome"] == Outcome.OK]
    for p, color in colors(rows).items():
        mine = ok[ok["policy"] == p].sort_values("batch_size")
        if mine.empty:
            continue
        ax.plot(mine["batch_size"], mine["achieved_tflops"], marker="o", color=color,
                label=f"{p} end to end")
        ax.plot(mine["batch_size"], mine["achieved_tflops_compute"], marker=".", linestyle=":",
                color=color, label=f"{p} compute only")
        peak = mine["peak_tflops"].dropna()
        if not peak.empty:
            ax.axhline(peak.median(), color=color, linestyle="--", linewidth=1,
                       label=f"{p} calibrated peak")
    _batch_axis(ax, rows)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if not ok.empty:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def _stacked_bars(ax, cells: pd.DataFrame, label: str) -> None:
    """One bar per (batch size, policy), stacked by the measured classes of one profiled step;
    beside each bar the profiled step (a line: where the bar ends if the classes close) and
    the timed step (a dot)."""
    bars = list(cells.groupby(["batch_size", "policy"], sort=True))
    names = [f"{int(b)}\n{p}" for (b, p), _ in bars]
    bottom = [0.0] * len(names)
    stacked = [(c, n) for c, n in CLASSES if c in STEP_CLASSES and c != "unattributed"]
    for i, (cls, name) in enumerate(stacked):
        heights = [float(g.loc[g["op_class"] == cls, "ms_of_step"].sum()) for _, g in bars]
        hatch = "//" if i >= 10 else None  # the tab10 colours run out after ten classes
        ax.bar(range(len(names)), heights, bottom=bottom, label=name, color=f"C{i % 10}",
               hatch=hatch)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    for column, style in (
        ("profiled_ms_per_step", {"marker": "_", "s": 900, "color": "k"}),
        ("timed_ms_per_step", {"marker": "o", "s": 18, "color": "k"}),
    ):
        steps = [float(g[column].iloc[0]) for _, g in bars]
        ax.scatter(
            range(len(names)),
            steps,
            zorder=3,
            label=column.removesuffix("_ms_per_step") + " step",
            **style,
        )
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.set_xlabel("batch size and policy")
    ax.set_ylabel("ms of the profiled step")
    ax.set_title(label, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)


def breakdown_figure(cells: pd.DataFrame, title: str) -> bytes:
    """Where each step's time went: stacked bars per batch size and policy."""
    fig, ax = plt.subplots(figsize=(9, 4.4))
    if cells.empty:
        ax.text(0.5, 0.5, "not profiled (train.profile_steps=0, or no cell ran ok)", ha="center")
        ax.axis("off")
    else:
        _stacked_bars(ax, cells, title)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return png(fig)


def render_plots(
    summary: pd.DataFrame, published: pd.DataFrame, short_name, breakdown: pd.DataFrame
) -> dict[str, bytes]:
    """PNG bytes by file name, relative to the report folder: per report group its
    ms/step, speedup, TFLOP/s and breakdown plots; and the published devices' ms/step.
    `short_name(row)` names a device in a title."""
    plots = {}
    for key, rows in groups(summary):
        machine, model, backend, variant, device = key
        title = f"{model} on {backend}, {variant} · {machine} {device}: {short_name(rows.iloc[0])}"
        cells = breakdown[(breakdown[GROUP_KEYS] == pd.Series(key, index=GROUP_KEYS)).all(axis=1)]
        figures = {
            "ms_per_step.png": ms_per_step_figure(rows, title),
            "speedup.png": speedup_figure(rows, published, title),
            "tflops.png": tflops_figure(rows, title),
            "breakdown.png": breakdown_figure(cells, f"{title}: ms per step by op class"),
        }
        plots |= {group_file(key, name): png for name, png in figures.items()}
    theirs = [(str(device), rows) for device, rows in published.groupby("device", sort=False)]
    plots[PUBLISHED_PLOT] = _figure(theirs, "Published (2020)")
    return plots
