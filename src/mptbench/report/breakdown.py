"""breakdown.csv, and each speedup explained op class by op class against the baseline.

A cell's breakdown (train/combine.py) is ms per step per op class, host overhead/idle
included, measured on a few profiled steps after its timed ones. A cell without one reads
"not profiled": the report never guesses where its time went.
"""

from __future__ import annotations

import pandas as pd

from mptbench.core.cells import AXES
from mptbench.core.opclasses import CLASSES, NAMES
from mptbench.core.policies import policy_of_record
from mptbench.report.summary import GROUP_KEYS, is_baseline
from mptbench.report.tables import fmt_ms
from mptbench.report.thresholds import BREAKDOWN_CHANGE, BREAKDOWN_NOTABLE
from mptbench.report.wording import speedup_text

COLUMNS = ["experiment", *AXES, "baseline", "op_class", "name", "ms_per_step", "share_of_step"]
# The sentence speaks of convolutions as one; the table keeps their three classes apart.
SENTENCE_GROUPS = {
    "convolutions": ("conv_forward", "conv_backward_input", "conv_backward_filter"),
    **{cls: (cls,) for cls, _ in CLASSES if not cls.startswith("conv_")},
}


def breakdown_table(records: list[dict]) -> pd.DataFrame:
    """One row per profiled cell and op class: ms per step and its share of the cell's step."""
    rows = []
    for record in records:
        classes = (record.get("breakdown") or {}).get("classes_ms")
        if not classes:
            continue
        step = record.get("ms_per_step") or sum(classes.values())
        for cls, name in CLASSES:
            ms = classes.get(cls, 0.0)
            rows.append({
                "experiment": record.get("experiment"), **{a: record.get(a) for a in AXES},
                "baseline": policy_of_record(record).baseline, "op_class": cls, "name": name,
                "ms_per_step": ms, "share_of_step": ms / step if step else None,
            })  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def _group_ms(cells: pd.DataFrame) -> dict[str, float]:
    by_class = cells.set_index("op_class")["ms_per_step"]
    return {
        g: float(sum(by_class.get(c, 0.0) for c in members))
        for g, members in SENTENCE_GROUPS.items()
    }


def _label(group: str) -> str:
    return "convolutions" if group == "convolutions" else NAMES[group]


def sentence(policy: str, base: dict, mine: dict, step_ms: float, summary_row) -> str:
    """'mixed_float16 saved 9.1 ms in convolutions (1.9x faster) but spent 2.3 ms more in
    casts; batch norm did not change; net 1.08× (...)'."""
    change = BREAKDOWN_CHANGE * step_ms
    saved, spent, same = [], [], []
    for group in SENTENCE_GROUPS:
        delta = mine[group] - base[group]
        if delta <= -change:
            faster = f" ({base[group] / mine[group]:.1f}x faster)" if mine[group] > 0 else ""
            saved.append(f"{fmt_ms(-delta)} ms in {_label(group)}{faster}")
        elif delta >= change:
            spent.append(f"{fmt_ms(delta)} ms more in {_label(group)}")
        elif base[group] >= BREAKDOWN_NOTABLE * step_ms:
            same.append(_label(group))
    parts = []
    if saved:
        parts.append("saved " + ", ".join(saved))
    if spent:
        parts.append(("but spent " if saved else "spent ") + ", ".join(spent))
    text = f"{policy} " + (" ".join(parts) if parts else "changed no op class by 2% of the step")
    if same:
        text += f"; {', '.join(same)} did not change"
    if summary_row is not None and pd.notna(summary_row["speedup_vs_baseline"]):
        verdict = summary_row["speedup_verdict"]
        net = "no measurable difference, " if verdict == "no measurable difference" else ""
        text += f"; net {net}{speedup_text(summary_row)} (speedup_vs_baseline)"
    return text + "."


def _comparison(base: pd.DataFrame, mine: pd.DataFrame) -> dict:
    b = base.set_index("op_class")["ms_per_step"]
    m = mine.set_index("op_class")["ms_per_step"]
    rows = []
    for cls, name in CLASSES:
        delta = m.get(cls, 0.0) - b.get(cls, 0.0)
        ratio = b.get(cls, 0.0) / m.get(cls) if m.get(cls, 0.0) > 0 else None
        rows.append({"name": name, "baseline": b.get(cls, 0.0), "policy": m.get(cls, 0.0),
                     "delta": delta, "ratio": ratio})  # fmt: skip
    return {"rows": rows, "baseline_total": float(b.sum()), "policy_total": float(m.sum())}


def _summary_row(summary: pd.DataFrame, group: tuple, policy, batch_size):
    keys = dict(zip(GROUP_KEYS, group, strict=True))
    keys |= {"policy": policy, "batch_size": batch_size}
    hit = summary[pd.concat([summary[k] == v for k, v in keys.items()], axis=1).all(axis=1)]
    return hit.iloc[0] if not hit.empty else None


def explain(table: pd.DataFrame, summary: pd.DataFrame) -> list[dict]:
    """Per group, batch size and policy other than the baseline: the class-by-class comparison
    with the baseline and its sentence."""
    out = []
    for (*group, batch_size), cells in table.groupby([*GROUP_KEYS, "batch_size"]):
        base = cells[is_baseline(cells)]
        if base.empty:
            continue
        step_ms = float(base["ms_per_step"].sum())
        baseline = str(base["policy"].iloc[0])
        for policy in [p for p in cells["policy"].unique() if p != baseline]:
            mine = cells[cells["policy"] == policy]
            row = _summary_row(summary, tuple(group), policy, batch_size)
            out.append({
                **dict(zip(GROUP_KEYS, group, strict=True)),
                "batch_size": int(batch_size), "baseline": baseline,
                "policy": policy, "comparison": _comparison(base, mine),
                "sentence": sentence(policy, _group_ms(base), _group_ms(mine), step_ms, row),
            })  # fmt: skip
    return out


def not_profiled(summary: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """The ok cells without a breakdown, as 'policy at batch N of model on backend · variant ·
    device', with the reason where the cell gave one."""
    keys = [*GROUP_KEYS, "policy", "batch_size"]
    profiled = set(table[keys].itertuples(index=False))
    ok = summary[summary["outcome"] == "ok"]
    return [
        f"{r.policy} at batch {int(r.batch_size)} of {r.model} on "
        f"{r.backend} · {r.variant} · {r.device}" + (f" ({note})" if isinstance(note, str) else "")
        for r, note in zip(ok[keys].itertuples(index=False), ok["profile_note"], strict=True)
        if tuple(r) not in profiled
    ]
