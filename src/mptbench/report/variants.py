"""The report's variant comparison: ms/step per variant and its speedup vs pypi; and, where
variants cap the instruction set (core/isa.py), what each generation buys a policy."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from mptbench.core import frameworks, isa
from mptbench.core.outcomes import WORDS, Outcome
from mptbench.report.summary import baseline_name
from mptbench.report.tables import cell, fmt_ms, plain_table, speedup_cell

BASELINE = "pypi"
SETTINGS = ["variant_description", "wheel", *frameworks.TENSORFLOW.versions, "onednn", "xla",
            "isa_cap", "kernel_isa", "onednn_isa", "tf_unused_cpu_instructions", "build_warning"]


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
    """Per device and policy, TensorFlow's variants side by side, and what each instruction-set
    generation buys (every backend's); None with a single TensorFlow variant."""
    every, summary = summary, summary[summary["backend"] == frameworks.TENSORFLOW.name]
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
        "warnings": [str(w) for w in warnings] + _above_cap(every),
        "generations": generations(every),
    }


def _above_cap(summary: pd.DataFrame) -> list[str]:
    """One line per variant whose cap did not take: a kernel above it ran."""
    if "kernel_above_cap" not in summary:
        return []
    above = summary[summary["kernel_above_cap"].fillna(False).astype(bool)]
    return [
        f"variant {v}: a kernel built for {row['kernel_isa']} ran, above its cap "
        f"{row['isa_cap']}: its cells are not what its name says"
        for v, row in above.drop_duplicates("variant").set_index("variant").iterrows()
    ]


@dataclass(frozen=True)
class Generation:
    """Where a variant stands among instruction-set generations: its place, its words in the
    table, its name in a sentence."""

    place: float
    words: str
    short: str


def generation(row: pd.Series) -> Generation:
    """A cap's place and what it adds; no cap: what its kernels were built for; oneDNN off:
    first."""
    cap = row.get("isa_cap")
    if isinstance(cap, str):
        return Generation(isa.rank(cap), f"{isa.cap(cap).words} ({cap})", cap)
    if str(row.get("onednn", "")).startswith("off"):
        return Generation(-2.0, "Eigen alone (oneDNN off)", "oneDNN off")
    built = row.get("kernel_isa")
    if not isinstance(built, str):
        return Generation(float(len(isa.CAPS)), "no cap", "no cap")
    return Generation(isa.place(built), f"no cap (kernels built for {built})",
                      f"no cap ({built})")


@dataclass(frozen=True)
class Figure:
    """A policy's figure under one generation: its speedup and interval, or why none."""

    where: Generation
    value: float | None = None
    low: float | None = None
    high: float | None = None
    batch: int | None = None
    why: str | None = None  # the outcome and reason where it did not run ok

    @property
    def words(self) -> str:
        if self.value is None:
            return self.why or "not run"
        spread = f" ({self.low:.2f}–{self.high:.2f})" if self.low is not None else ""
        return f"{self.value:.2f}×{spread}"


def _best(rows: pd.DataFrame) -> pd.Series | None:
    """A policy's best cell of one variant: its fastest ok batch, else its first other."""
    ok = rows[(rows["outcome"] == Outcome.OK) & rows["speedup_vs_baseline"].notna()]
    if not ok.empty:
        return ok.loc[ok["ms_per_step"].idxmin()]
    return rows.iloc[0] if not rows.empty else None


def _figure(where: Generation, row: pd.Series | None) -> tuple[dict, Figure]:
    """A policy's table cell and figure for one generation."""
    if row is None:
        return cell("—", "missing"), Figure(where)
    if row["outcome"] != Outcome.OK:
        word = WORDS.get(row["outcome"], str(row["outcome"]))
        reason = row.get("reason") if isinstance(row.get("reason"), str) else word
        return cell(word, "fail", reason), Figure(where, why=f"{word} ({reason})")
    value = float(row["speedup_vs_baseline"])
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    known = pd.notna(low) and pd.notna(high)
    figure = Figure(where, value, float(low) if known else None, float(high) if known else None,
                    int(row["batch_size"]))
    return speedup_cell(value, low, high, row.get("speedup_verdict")), figure


def generations(summary: pd.DataFrame) -> list[dict]:
    """Per machine, model, backend and device where variants cap the instruction set: each
    variant by generation, what its kernels were built for, each policy's speedup over the
    baseline (its fastest batch) and its dtype's matmul peak over float32's; and the sentence
    that names the generation each policy's speedup turns on."""
    if "isa_cap" not in summary or summary["isa_cap"].dropna().empty:
        return []
    found = []
    keys = ["machine", "model", "backend", "device"]
    for (machine, model, backend, device), rows in summary.groupby(keys, sort=True):
        if rows["isa_cap"].dropna().empty or rows["variant"].nunique() < 2:
            continue
        found.append(_generations_of(rows, f"{model} on {device} of {machine} · {backend}"))
    return found


def _generations_of(rows: pd.DataFrame, title: str) -> dict:
    base = baseline_name(rows)
    others = [p for p in dict.fromkeys(rows["policy"]) if p != base]
    order = sorted(dict.fromkeys(rows["variant"]),
                   key=lambda v: generation(rows[rows["variant"] == v].iloc[0]).place)
    head = [cell("variant"), cell("instruction set"), cell("kernels built for")]
    head += [cell(p, small=f"vs {base}") for p in others]
    head += [cell(p, small="matmul peak vs float32") for p in others]
    body, said = [], {p: [] for p in others}
    for variant in order:
        mine = rows[rows["variant"] == variant]
        first = mine.iloc[0]
        where = generation(first)
        above = bool(mine["kernel_above_cap"].fillna(False).any())
        built = first.get("kernel_isa") if isinstance(first.get("kernel_isa"), str) else "—"
        flag = ("fail", "a kernel above its cap ran") if above else (None, None)
        tds = [cell(variant), cell(where.words), cell(built, *flag)]
        for policy in others:
            shown, figure = _figure(where, _best(mine[mine["policy"] == policy]))
            tds.append(shown)
            said[policy].append(figure)
        for policy in others:
            peak = mine.loc[mine["policy"] == policy, "matmul_peak_vs_float32"].dropna()
            tds.append(cell(f"{peak.iloc[0]:.2f}×" if not peak.empty else "—"))
        body.append(tds)
    sentences = [turns_on(policy, base, said[policy]) for policy in others]
    return {"title": title, "table": {"head": head, "rows": body},
            "sentences": [s for s in sentences if s]}


def turns_on(policy: str, base: str, figures: list[Figure]) -> str | None:
    """'mixed_bfloat16 against float32: unsupported at AVX, AVX2 (oneDNN: ...); 0.28× (..) at
    AVX512_CORE; ... It turns on AVX512_CORE_BF16: from 0.28× (..) to 0.85× (..).' The turn
    named is where it first runs, or the largest step between two generations whose intervals
    do not overlap; without one, the sentence says no generation measurably changed it."""
    if len(figures) < 2:
        return None
    parts, i = [], 0
    while i < len(figures):  # generations that did not run for the same reason: said once
        j = i
        while j + 1 < len(figures) and figures[j + 1].value is None and (
                figures[j + 1].why == figures[i].why) and figures[i].value is None:
            j += 1
        names = ", ".join(f.where.short for f in figures[i: j + 1])
        parts.append(f"{figures[i].words} at {names}")
        i = j + 1
    sentence = f"{policy} against {base} at its fastest batch: {'; '.join(parts)}."
    return f"{sentence} {_turn(figures)}"


def _turn(figures: list[Figure]) -> str:
    runs = [f for f in figures if f.value is not None]
    steps = [(b.value / a.value, a, b) for a, b in zip(runs, runs[1:], strict=False)
             if a.high is not None and b.low is not None and (b.low > a.high or b.high < a.low)]
    first = next((f for f in figures if f.value is not None), None)
    said = []
    if first is not None and first is not figures[0]:
        said.append(f"It first runs at {first.where.short}.")
    if steps:
        _, a, b = max(steps, key=lambda s: abs(math.log(s[0])))
        said.append(f"The generation that decides is {b.where.short}: from {a.words} at "
                    f"{a.where.short} to {b.words}.")
    elif len(runs) > 1:
        said.append("No generation measurably changes it here (every interval overlaps the "
                    "next).")
    return " ".join(said)
