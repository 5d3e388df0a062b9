"""The report's TensorFlow-variant comparison: ms/step per variant and its speedup vs pypi."""

from __future__ import annotations

from html import escape

import pandas as pd

BASELINE = "pypi"
SETTINGS = ["wheel", "tensorflow", "onednn", "xla", "tf_unused_cpu_instructions", "build_warning"]


def speedup_cell(speedup) -> str:
    """A table cell for a speedup: green above 1, red below, a dash where there is none."""
    if speedup is None or pd.isna(speedup):
        return '<td class="missing">—</td>'
    css = "faster" if speedup > 1 else "slower" if speedup < 1 else ""
    return f'<td class="{css}">{speedup:.2f}×</td>'


def variant_speedups(summary: pd.DataFrame) -> pd.DataFrame:
    """speedup_vs_pypi: pypi's ms/step over each variant's, same device, policy and batch size."""
    ok = summary[(summary["outcome"] == "ok") & (summary["ms_per_step"] > 0)]
    keys = ["device", "policy", "batch_size"]
    base = ok[ok["variant"] == BASELINE].groupby(keys)["ms_per_step"].median().rename("_pypi_ms")
    out = ok.merge(base.reset_index(), on=keys, how="left")
    out["speedup_vs_pypi"] = out["_pypi_ms"] / out["ms_per_step"]
    return out.drop(columns="_pypi_ms")


def _table(rows: pd.DataFrame, variants: list[str]) -> str:
    head = "<th>batch size</th>" + "".join(
        f"<th>{escape(v)}<small>ms/step</small></th>"
        + ("" if v == BASELINE else f"<th>{escape(v)}<small>vs {BASELINE}</small></th>")
        for v in variants
    )
    body = []
    for batch_size in sorted(set(rows["batch_size"])):
        tds = [f"<td>{int(batch_size)}</td>"]
        for v in variants:
            hit = rows[(rows["batch_size"] == batch_size) & (rows["variant"] == v)]
            if hit.empty:
                tds.append('<td class="missing">—</td>')
                tds += [] if v == BASELINE else ['<td class="missing">—</td>']
                continue
            cell = hit.iloc[-1]
            tds.append(f"<td>{cell['ms_per_step']:.1f}</td>")
            if v != BASELINE:
                tds.append(speedup_cell(cell["speedup_vs_pypi"]))
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><tr>{head}</tr>\n" + "\n".join(body) + "</table>"


def _settings(summary: pd.DataFrame) -> str:
    """Each variant's effective settings, as its runs recorded them."""
    columns = [c for c in SETTINGS if c in summary.columns]
    rows = summary.drop_duplicates("variant", keep="last")[["variant", *columns]]
    head = "".join(f'<th class="text">{escape(c)}</th>' for c in rows.columns)
    body = "\n".join(
        "<tr>"
        + "".join(f'<td class="text">{"—" if pd.isna(v) else escape(str(v))}</td>' for v in row)
        + "</tr>"
        for row in rows.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>\n{body}</table>"


def variants_section(summary: pd.DataFrame) -> str:
    """Per device and policy, the variants side by side; empty with a single variant."""
    variants = list(dict.fromkeys(summary["variant"]))
    if len(variants) < 2:
        return ""
    variants = sorted(variants, key=lambda v: (v != BASELINE, v))
    speedups = variant_speedups(summary)
    parts = [
        "<h2>TensorFlow variants</h2>",
        "<p>The same cells with each TensorFlow variant; above 1 means faster than the PyPI "
        f"wheel ({BASELINE}). Effective settings as the runs recorded them:</p>",
        _settings(summary),
    ]
    for (device, policy), rows in speedups.groupby(["device", "policy"], sort=True):
        parts.append(f"<h3>{escape(device)} · {escape(policy)}</h3>")
        parts.append(_table(rows, variants))
    warnings = summary["build_warning"].dropna().unique() if "build_warning" in summary else []
    for warning in warnings:
        parts.append(f'<p class="fail">{escape(str(warning))}</p>')
    return "\n".join(parts)
