"""The report's tables as data: a table is {"head": [cell], "rows": [[cell]]}, a cell a dict
with its text and, optionally, a css class, a title (hover text), a small second line and a
link.
The page template renders them; nothing here writes HTML."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mptbench.core.outcomes import WORDS, Outcome
from mptbench.core.stats import Verdict
from mptbench.report.summary import baseline_name, policies


def cell(
    text: Any,
    css: str | None = None,
    title: str | None = None,
    small: str | None = None,
    href: str | None = None,
):
    return {"text": text, "css": css, "title": title, "small": small, "href": href}


def fmt_ms(value: float) -> str:
    if float(value).is_integer() or value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def text(value) -> str:
    """A value for a table cell; missing values as a dash."""
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return "—"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def speedup_cell(speedup, low=None, high=None, verdict=None) -> dict:
    """A speedup with its 95% interval: green when measurably faster, red when measurably
    slower; "no measurable difference" when the interval holds 1; a dash where there is none."""
    if speedup is None or pd.isna(speedup):
        return cell("—", "missing")
    interval = None if low is None or pd.isna(low) else f"95% CI {low:.2f}–{high:.2f}"
    if verdict == Verdict.SAME:
        return cell(Verdict.SAME, "same", small=f"{speedup:.2f}×, {interval}")
    css = {Verdict.FASTER: "faster", Verdict.SLOWER: "slower"}.get(verdict)
    if verdict is None or not isinstance(verdict, str):  # no interval: the point alone
        css = "faster" if speedup > 1 else "slower" if speedup < 1 else None
    return cell(f"{speedup:.2f}×", css, small=interval)


def ms_cell(row: pd.Series | None) -> dict:
    """A cell's mean ms/step with its 95% interval, or the outcome that left it without one."""
    if row is None:
        return cell("—", "missing", "not run")
    if row["outcome"] != Outcome.OK or pd.isna(row["ms_per_step"]):
        word = WORDS.get(row["outcome"], str(row["outcome"]))
        reason = row.get("reason")
        return cell(word, "fail", reason if isinstance(reason, str) else word)
    spread = None
    if pd.notna(row.get("ms_per_step_ci_low")) and pd.notna(row.get("ms_per_step_ci_high")):
        spread = f"95% CI {fmt_ms(row['ms_per_step_ci_low'])}–{fmt_ms(row['ms_per_step_ci_high'])}"
    elif pd.notna(row.get("ms_per_step_p10")) and pd.notna(row.get("ms_per_step_p90")):
        spread = f"p10–p90: {fmt_ms(row['ms_per_step_p10'])}–{fmt_ms(row['ms_per_step_p90'])}"
    return cell(fmt_ms(row["ms_per_step"]), small=spread)


def _speedup_of(row: pd.Series | None) -> dict:
    if row is None:
        return speedup_cell(None)
    return speedup_cell(
        row["speedup_vs_baseline"], row.get("speedup_ci_low"), row.get("speedup_ci_high"),
        row.get("speedup_verdict"),
    )


def policy_label(rows: pd.DataFrame, policy: str) -> str:
    """A policy's column name: "float32 (TF32)" where its float32 math ran as TF32 (GPUs from
    Ampere on, unless device.gpu.tf32=false)."""
    mine = rows[rows["policy"] == policy]
    tf32 = "tf32" in mine and bool(mine["tf32"].fillna(False).astype(bool).any())
    in_float32 = "compute_dtype" in mine and (mine["compute_dtype"] == "float32").any()
    return f"{policy} (TF32)" if tf32 and in_float32 else policy


def policy_table(rows: pd.DataFrame, pols: list[str] | None = None) -> dict:
    """Rows batch size; per policy ms/step, and per other policy its speedup over the
    baseline."""
    pols = pols or policies(rows)
    base = baseline_name(rows)
    keys = ["batch_size", "policy"]
    cells = rows.drop_duplicates(keys, keep="last").set_index(keys)
    head = [cell("batch size")]
    for p in pols:
        head.append(cell(policy_label(rows, p), small="ms/step"))
        if p != base:
            head.append(cell(p, small=f"speedup vs {base}" if base else "speedup (no baseline)"))
    body = []
    for batch_size in sorted(set(rows["batch_size"])):
        tds = [cell(int(batch_size))]
        for p in pols:
            row = cells.loc[(batch_size, p)] if (batch_size, p) in cells.index else None
            tds.append(ms_cell(row))
            if p != base:
                tds.append(_speedup_of(row))
        body.append(tds)
    return {"head": head, "rows": body}


def backends_table(rows: pd.DataFrame) -> dict:
    """One model, variant and device on several backends: rows batch size and backend, columns
    as in policy_table (every speedup is over the same backend's baseline)."""
    pols = policies(rows)
    tables = {b: policy_table(mine, pols) for b, mine in rows.groupby("backend", sort=True)}
    return interleaved(tables, cell("backend"))


def interleaved(
    tables: dict[str, dict], label: dict, notes: dict[str, dict] | None = None,
    notes_head: dict | None = None,
) -> dict:
    """Policy tables (name: policy_table, same columns) in one: rows batch size, then each
    table's name under `label` (and its cell of `notes`), the columns policy_table's."""
    first = next(iter(tables.values()))
    head = [first["head"][0], label, *([notes_head] if notes else []), *first["head"][1:]]
    batch_sizes = sorted({tds[0]["text"] for t in tables.values() for tds in t["rows"]})
    body = [
        [tds[0], cell(name, "text"), *([notes[name]] if notes else []), *tds[1:]]
        for batch_size in batch_sizes
        for name, table in tables.items()
        for tds in table["rows"]
        if tds[0]["text"] == batch_size
    ]
    return {"head": head, "rows": body}


def plain_table(df: pd.DataFrame) -> dict:
    """Every value as left-aligned text."""
    return {
        "head": [cell(str(c), "text") for c in df.columns],
        "rows": [[cell(text(v), "text") for v in row] for row in df.itertuples(index=False)],
    }
