"""breakdown.csv, and each speedup explained op class by op class against the baseline.

A cell's breakdown (jobs/combine.py, jobs/profiles.py) is what its profiled steps measured, per
class: the ops' self time summed over the step's executor threads, the executor's own time
between ops ("framework") and the threads' waiting ("idle") from the timeline, and what none
of them accounts for ("unattributed"). Nothing is rescaled: a class's part of one step is its
milliseconds over the threads, the profiled step (under the profiler) and the timed step
(without it) stand beside them, and `closure` says how far the measured classes account for
the profiled step. Background input (tf.data's threads preparing the next batches) overlaps
the step and is not part of its sum. A cell without one reads "not profiled": the report never
guesses where its time went.
"""

from __future__ import annotations

import pandas as pd

from mptbench.core.cells import AXES, COMPARISON_AXES, key_of
from mptbench.core.opclasses import CLASSES, NAMES, OUTSIDE, STEP_CLASSES
from mptbench.core.outcomes import Outcome
from mptbench.core.policies import KEEP, kept, policy_of_record
from mptbench.core.stats import Verdict
from mptbench.report.summary import GROUP_KEYS, is_baseline
from mptbench.report.tables import fmt_ms
from mptbench.report.thresholds import BREAKDOWN_CHANGE, BREAKDOWN_NOTABLE, PROFILE_SKEW
from mptbench.report.wording import speedup_text

COLUMNS = [
    "experiment", *AXES, "baseline", "op_class", "name", "in_step",
    "ms_per_step", "ms_min", "ms_max", "threads", "ms_of_step", "share_of_profiled_step",
    "profiled_ms_per_step", "function_ms_per_step", "timed_ms_per_step", "closure", "profiles",
    "profile_steps",
]
# The comparison's rows after the classes: the profiled step, its part in Keras' train function
# (on a CPU's timeline only) and the timed step.
PROFILED_ROW, FUNCTION_ROW = "profiled step", "of which in the train function"
# The sentence speaks of convolutions as one; the table keeps their three classes apart. It
# names what was measured only: not the unattributed rest, not what overlapped the step.
SENTENCE_GROUPS = {
    "convolutions": ("conv_forward", "conv_backward_input", "conv_backward_filter"),
    **{c: (c,) for c in STEP_CLASSES if not c.startswith("conv_") and c != "unattributed"},
}


def breakdown_table(records: list[dict]) -> pd.DataFrame:
    """One row per profiled cell and class: the raw ms per profiled step (summed over the step's
    threads; median, min and max over the profiled repeats), the class's part of one step
    (ms_of_step: over the threads) and its share of the profiled step, beside the profiled and
    the timed step and the closure."""
    rows = []
    for record in records:
        found = record.get("breakdown") or {}
        classes = found.get("classes_ms")
        if not classes:
            continue
        threads = found.get("threads") or 1
        profiled = found.get("profiled_ms_per_step")
        axes = dict(zip(AXES, key_of(record, AXES), strict=True))
        for cls, name in CLASSES:
            ms = classes.get(cls)
            rows.append({
                "experiment": record.get("experiment"), **axes,
                "baseline": policy_of_record(record).baseline, "op_class": cls, "name": name,
                "in_step": cls in STEP_CLASSES, "ms_per_step": ms,
                "ms_min": (found.get("classes_min_ms") or {}).get(cls),
                "ms_max": (found.get("classes_max_ms") or {}).get(cls),
                "threads": found.get("threads"),
                "ms_of_step": None if ms is None else ms / threads,
                "share_of_profiled_step": ms / threads / profiled if ms is not None and profiled
                else None,
                "profiled_ms_per_step": profiled,
                "function_ms_per_step": found.get("function_ms_per_step"),
                "timed_ms_per_step": found.get("timed_ms_per_step", record.get("ms_per_step")),
                "closure": found.get("closure"), "profiles": found.get("profiles"),
                "profile_steps": found.get("profile_steps"),
            })
    return pd.DataFrame(rows, columns=COLUMNS)


LAYER_COLUMNS = [
    "experiment", *AXES, "baseline", "layer_type", "layer", "op_class", "name", "ms_per_step",
    "ms_min", "ms_max", "baseline_ms_per_step", "ops_per_step", "op_types", "kernels",
]
OWN_KERNELS = "TensorFlow's own kernels (oneDNN created none)"


def kernels_of(record: dict) -> str | None:
    """Which library's kernels the cell's process ran its dtype's ops in, as its fingerprint
    says (core/isa.py Kernels): oneDNN's implementations, TensorFlow's own where oneDNN was
    asked and created none, None where it was not asked (the user's own ONEDNN_VERBOSE)."""
    found = record.get("fingerprint") or {}
    if found.get("kernels"):
        return f"oneDNN: {found['kernels']}"
    return OWN_KERNELS if "kernels" in found else None


def layers_table(records: list[dict]) -> pd.DataFrame:
    """layers.csv: one row per profiled cell, layer of its model (with its type) and op class:
    the ms its ops took a profiled step (summed over the step's threads, as breakdown.csv's;
    median, min and max over the profiled repeats) beside the same layer and class in the
    comparison's baseline cell, how many ops ran a step and their op types (TensorFlow's op
    type names the kernel it ran: Conv2DBackpropInput, _FusedConv2D). The ops outside every
    layer (the optimizer, the loss, the input) have a row of their own. A cell's rows add up to
    its classes in breakdown.csv, framework and idle aside."""
    baselines = {key_of(r, COMPARISON_AXES): r for r in records
                 if policy_of_record(r).baseline and (r.get("breakdown") or {}).get("layers")}
    rows = []
    for record in records:
        layers = (record.get("breakdown") or {}).get("layers")
        if not layers:
            continue
        base = baselines.get(key_of(record, COMPARISON_AXES))
        base_ms = {(r["layer"], r["op_class"]): r["ms"]
                   for r in ((base or {}).get("breakdown") or {}).get("layers", [])}
        axes = dict(zip(AXES, key_of(record, AXES), strict=True))
        for layer in layers:
            rows.append({
                "experiment": record.get("experiment"), **axes,
                "baseline": policy_of_record(record).baseline,
                "layer_type": layer["layer_type"], "layer": layer["layer"],
                "op_class": layer["op_class"], "name": NAMES[layer["op_class"]],
                "ms_per_step": layer["ms"], "ms_min": layer.get("ms_min"),
                "ms_max": layer.get("ms_max"),
                "baseline_ms_per_step": base_ms.get((layer["layer"], layer["op_class"]), 0.0)
                if base else None,
                "ops_per_step": layer.get("ops"), "op_types": " ".join(layer.get("op_types", [])),
                "kernels": kernels_of(record),
            })
    return pd.DataFrame(rows, columns=LAYER_COLUMNS)


def _group_ms(cells: pd.DataFrame) -> dict[str, float]:
    by_class = cells.set_index("op_class")["ms_of_step"].fillna(0.0)
    return {
        g: float(sum(by_class.get(c, 0.0) for c in members))
        for g, members in SENTENCE_GROUPS.items()
    }


def _label(group: str) -> str:
    return "convolutions" if group == "convolutions" else NAMES[group]


def sentence(policy: str, base: dict, mine: dict, step_ms: float, summary_row) -> str:
    """'mixed_float16 saved 9.1 ms in convolutions (1.9x faster) but spent 2.3 ms more in
    casts; batch norm did not change; net 1.08× (...)'. The ms are of the profiled step
    (`step_ms`, the baseline's), per executor thread."""
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
        net = f"{Verdict.SAME}, " if verdict == Verdict.SAME else ""
        text += f"; net {net}{speedup_text(summary_row)} (speedup_vs_baseline)"
    return text + "."


def _comparison(base: pd.DataFrame, mine: pd.DataFrame) -> dict:
    """Class by class, ms of one profiled step (per executor thread) under the baseline and
    the policy; then the profiled step, its part in the train function (the rest is Python and
    callbacks around it) and the timed step, each as measured."""
    b = base.set_index("op_class")["ms_of_step"]
    m = mine.set_index("op_class")["ms_of_step"]
    rows = []
    for cls, name in CLASSES:
        if pd.isna(b.get(cls)) and pd.isna(m.get(cls)):
            continue  # not measured for either (framework and idle on a GPU)
        before, after = float(b.get(cls, 0.0)), float(m.get(cls, 0.0))
        rows.append(_row(name, before, after))
    for column, name in (("profiled_ms_per_step", PROFILED_ROW),
                         ("function_ms_per_step", FUNCTION_ROW),
                         ("timed_ms_per_step", "timed step (no profiler)")):
        before, after = base[column].iloc[0], mine[column].iloc[0]
        if pd.notna(before) and pd.notna(after):  # no train function's window on a GPU
            rows.append(_row(name, float(before), float(after)))
    closure = (base["closure"].iloc[0], mine["closure"].iloc[0])
    return {"rows": rows, "closure": tuple(None if pd.isna(c) else float(c) for c in closure)}


def _row(name: str, before: float, after: float) -> dict:
    ratio = before / after if before > 0 and after > 0 else None
    return {"name": name, "baseline": before, "policy": after, "delta": after - before,
            "ratio": ratio}


def _cell_rows(table: pd.DataFrame, group, policy, batch_size) -> pd.DataFrame:
    """A table's rows of one cell: its group, policy and batch size."""
    keys = dict(zip(GROUP_KEYS, group, strict=True))
    keys |= {"policy": policy, "batch_size": batch_size}
    return table[pd.concat([table[k] == v for k, v in keys.items()], axis=1).all(axis=1)]


def _summary_row(summary: pd.DataFrame, group: tuple, policy, batch_size):
    hit = _cell_rows(summary, group, policy, batch_size)
    return hit.iloc[0] if not hit.empty else None


def by_layer_type(rows: pd.DataFrame, threads: int) -> list[dict]:
    """A comparison's layers.csv rows (one policy's cell) by layer type, largest change first:
    how many layers, their ms of one profiled step (over the threads, as the classes' sentence
    has them) under the baseline and the policy, and the op class that moved most in them."""
    out = []
    for kind, of_kind in rows.groupby("layer_type"):
        delta = (of_kind["ms_per_step"] - of_kind["baseline_ms_per_step"]) / threads
        by_class = delta.groupby(of_kind["op_class"]).sum()
        top = by_class.abs().idxmax()
        out.append({
            "layer_type": kind, "layers": of_kind["layer"].nunique(),
            "baseline": of_kind["baseline_ms_per_step"].sum() / threads,
            "policy": of_kind["ms_per_step"].sum() / threads, "delta": float(delta.sum()),
            "class": NAMES[top], "class_delta": float(by_class[top]),
        })
    return sorted(out, key=lambda t: -abs(t["delta"]))


def layer_sentence(policy: str, types: list[dict], step_ms: float, most: int = 3,
                   kernels: str | None = None) -> str | None:
    """'By layer: the 17 DepthwiseConv2D layers +24 ms (most of it convolution backward
    (input), +20 ms), casts ...': the layer types whose ops moved by at least 2% of the
    baseline's profiled step, largest first, at most `most`; None where none did."""
    change = BREAKDOWN_CHANGE * step_ms
    moved = [t for t in types if abs(t["delta"]) >= change][:most]
    if not moved:
        return None

    def one(t: dict) -> str:
        count = f"{t['layers']} " if t["layers"] > 1 else ""
        what = (f"the {count}{t['layer_type']} layer{'s' * (t['layers'] > 1)}"
                if t["layer_type"] != OUTSIDE else "the ops outside the layers")
        return f"{what} {t['delta']:+.1f} ms (most of it {t['class']}, {t['class_delta']:+.1f} ms)"

    net = sum(t["delta"] for t in types)
    text = (f"By layer, {policy}'s ops took {net:+.1f} ms a step against the baseline's: "
            + "; ".join(one(t) for t in moved) + ".")
    if kernels:
        text += f" Its kernels: {kernels}."
    costly = [t["layer_type"] for t in moved if t["delta"] > 0 and t["layer_type"] != OUTSIDE]
    if costly and kept(policy) is None:  # the change to try: those layers in float32
        text += (f" To try: policy {policy}{KEEP}{costly[0]} (its {costly[0]} layers in "
                 "float32), timed beside the others.")
    return text


def explain(table: pd.DataFrame, summary: pd.DataFrame,
            layers: pd.DataFrame | None = None) -> list[dict]:
    """Per group, batch size and policy other than the baseline: the class-by-class comparison
    with the baseline and its sentence; where its cells were profiled by layer (layers.csv's
    rows, `layers`), the layer types that moved most, and their sentence."""
    out = []
    for (*group, batch_size), cells in table.groupby([*GROUP_KEYS, "batch_size"]):
        base = cells[is_baseline(cells)]
        if base.empty:
            continue
        step_ms = float(base["profiled_ms_per_step"].iloc[0])
        baseline = str(base["policy"].iloc[0])
        for policy in [p for p in cells["policy"].unique() if p != baseline]:
            mine = cells[cells["policy"] == policy]
            row = _summary_row(summary, tuple(group), policy, batch_size)
            mine_layers = (_cell_rows(layers, group, policy, batch_size)
                           if layers is not None and not layers.empty else None)
            types = _layer_types(mine_layers, mine)
            said = sentence(policy, _group_ms(base), _group_ms(mine), step_ms, row)
            skew = skew_words(baseline, policy, base, mine)
            out.append({
                **dict(zip(GROUP_KEYS, group, strict=True)),
                "batch_size": int(batch_size), "baseline": baseline,
                "policy": policy, "comparison": _comparison(base, mine),
                "sentence": f"{said} {skew}" if skew else said,
                "layer_types": types,
                "layer_sentence": layer_sentence(policy, types, step_ms,
                                                 kernels=_kernels_of_rows(mine_layers)),
            })
    return out


def _slowed(cells: pd.DataFrame) -> float | None:
    """How much the profiler slowed a cell's step: its profiled step over its timed one."""
    profiled, timed = cells["profiled_ms_per_step"].iloc[0], cells["timed_ms_per_step"].iloc[0]
    if pd.isna(profiled) or pd.isna(timed) or not profiled or not timed:
        return None
    return float(profiled) / float(timed)


def skew_words(baseline: str, policy: str, base: pd.DataFrame, mine: pd.DataFrame) -> str | None:
    """'The profiler slowed float32's step 1.73× and mixed_bfloat16's 1.19× ...': where the two
    were slowed by factors more than PROFILE_SKEW apart, so that their profiled ms do not split
    the timed difference; None where they were slowed alike (or a step is not known)."""
    a, b = _slowed(base), _slowed(mine)
    if a is None or b is None or max(a, b) / min(a, b) <= 1 + PROFILE_SKEW:
        return None
    return (f"The profiler slowed {baseline}'s step {a:.2f}× and {policy}'s {b:.2f}× (profiled "
            "against timed): these ms are not the parts of the timed difference.")


def _kernels_of_rows(rows: pd.DataFrame | None) -> str | None:
    """The kernels column of one cell's layers.csv rows (the cell's, the same in each)."""
    found = rows["kernels"].dropna() if rows is not None else ()
    return str(found.iloc[0]) if len(found) else None


def _layer_types(rows: pd.DataFrame | None, mine: pd.DataFrame) -> list[dict]:
    """by_layer_type of one comparison's policy cell, from its layers.csv rows; [] without."""
    if rows is None or rows.empty or rows["baseline_ms_per_step"].isna().all():
        return []
    threads = mine["threads"].iloc[0]
    return by_layer_type(rows, int(threads) if pd.notna(threads) and threads else 1)


def not_profiled(summary: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """The ok cells without a breakdown, as 'policy at batch N of model on backend · variant ·
    device', with the reason where the cell gave one."""
    keys = [*GROUP_KEYS, "policy", "batch_size"]
    profiled = set(table[keys].itertuples(index=False))
    ok = summary[summary["outcome"] == Outcome.OK]
    return [
        f"{r.policy} at batch {int(r.batch_size)} of {r.model} on "
        f"{r.backend} · {r.variant} · {r.device}" + (f" ({note})" if isinstance(note, str) else "")
        for r, note in zip(ok[keys].itertuples(index=False), ok["profile_note"], strict=True)
        if tuple(r) not in profiled
    ]
