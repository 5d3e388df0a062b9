"""What fits: per model, backend, variant and device, each policy's largest batch that fit (the
fits rule's search) and its peak memory at each batch size tried, with the published 2020
Quadro M2200 (4 GB) beside them: the card on which mixed precision let a batch fit that
float32 could not."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mptbench.core import policies as policy_facts
from mptbench.core.cells import key_of
from mptbench.core.outcomes import Outcome
from mptbench.report.published import PUBLISHED_BASELINE
from mptbench.report.tables import cell, plain_table

# The published card whose rows show a batch that fits only with mixed precision.
PUBLISHED_SMALL_CARD = "Quadro M2200"


def _order(searches: list[dict]) -> list[dict]:
    facts = {s["policy"]: (bool(s.get("baseline")), s.get("compute_dtype", "")) for s in searches}
    names = policy_facts.order(facts)
    return sorted(searches, key=lambda s: names.index(s["policy"]))


def _limit(searches: list[dict]) -> str:
    limits = {s["memory_limit"] for s in searches}
    return "; ".join(sorted(limits))


def largest(search: dict) -> str:
    """'256' or '≥ 512 (the cap)' or 'none'."""
    if search["largest_fit"] is None:
        return "none"
    if search["smallest_failed"] is None:
        return f"≥ {search['largest_fit']} (every batch tried fit)"
    return str(search["largest_fit"])


def _open(search: dict) -> bool:
    """A search that ended with no batch out of memory and below its cap (a batch over the
    step budget, or another failure, ended it)."""
    return search["smallest_failed"] is None and search["largest_fit"] != search.get("max_batch")


def sentence(search: dict, baseline: dict) -> str:
    """'mixed_float16 fits batch 512 where float32 fits 256 (limit ...)' and its kin."""
    mine, base = search["largest_fit"], baseline["largest_fit"]
    name, base_name = search["policy"], baseline["policy"]
    limit = f"under {search['memory_limit']}"
    if mine is None:
        return f"{name} fit no batch at all ({limit}; {search['stopped_by']})."
    if _open(search):
        why = search["stopped_by"]
        return (f"{name} fit every batch it tried, up to {mine} ({limit}); the search stopped "
                f"there ({why}), so how large a batch fits is not known.")
    if search["smallest_failed"] is None and baseline["smallest_failed"] is None:
        return (f"{name} and {base_name} both fit every batch tried, up to {max(mine, base or 0)}"
                f" ({limit}): memory did not decide here.")
    if base is None or mine > base:
        where = "none" if base is None else f"{base}"
        return f"{name} fits batch {mine} where {base_name} fits {where} ({limit})."
    if mine < base:
        return f"{name} fits only batch {mine} where {base_name} fits {base} ({limit})."
    return f"{name} fits the same largest batch as {base_name}, {mine} ({limit})."


def _source(tried: dict) -> str | None:
    """Where a try's peak came from, and what its cgroup's limit counted beside it."""
    counted = tried.get("limit_counted_mb")
    if counted is None:
        return tried.get("peak_source")
    return f"{tried.get('peak_source')}; its cgroup counted {counted:.0f} MB, page cache included"


def _peaks_table(searches: list[dict]) -> dict:
    """Batch sizes as rows, per policy the peak memory of its try (or its outcome), and the
    ratio to the baseline's peak at the same batch size."""
    tries = {s["policy"]: {t["batch_size"]: t for t in s["tries"]} for s in searches}
    base = next((s["policy"] for s in searches if s.get("baseline")), None)
    batches = sorted({b for t in tries.values() for b in t})
    head = [cell("batch size")] + [cell(s["policy"], small="peak MB") for s in searches]
    rows = []
    for batch in batches:
        row = [cell(batch)]
        for s in searches:
            t = tries[s["policy"]].get(batch)
            if t is None:
                row.append(cell("—", "missing", "not tried"))
            elif t["outcome"] != Outcome.OK:
                row.append(cell(t["outcome"], "fail", t.get("reason")))
            else:
                ratio = None
                b = tries.get(base, {}).get(batch) if base else None
                if b and b["outcome"] == Outcome.OK and s["policy"] != base and b["peak_mb"]:
                    ratio = f"{t['peak_mb'] / b['peak_mb']:.2f}× {base}"
                row.append(cell(f"{t['peak_mb']:.0f}", title=_source(t), small=ratio))
        rows.append(row)
    return {"head": head, "rows": rows}


def published_small_card(published: pd.DataFrame) -> str | None:
    """The seed's small card, as the same sentence: which batch each policy fit."""
    rows = published[published["device"] == PUBLISHED_SMALL_CARD]
    if rows.empty:
        return None
    fits = {
        policy: int(g.loc[g["outcome"] == Outcome.OK, "batch_size"].max())
        for policy, g in rows.groupby("policy")
    }
    memory = int(rows["memory_gb"].iloc[0])
    others = [f"{p} fit batch {b}" for p, b in fits.items() if p != PUBLISHED_BASELINE]
    return (
        f"Published (2020), {PUBLISHED_SMALL_CARD} ({memory} GB): {', '.join(others)} where "
        f"{PUBLISHED_BASELINE} fit {fits.get(PUBLISHED_BASELINE)} (larger batches: OOM)."
    )


def fits_sections(searches: list[dict], published: pd.DataFrame) -> dict[str, Any] | None:
    """Per report group: its sentences, a table of each policy's largest
    batch, a table of peak memory per batch size; then the published small card."""
    if not searches:
        return None
    grouped: dict[tuple, list[dict]] = {}
    for s in searches:
        grouped.setdefault(key_of(s), []).append(s)
    out = []
    for key, found in sorted(grouped.items()):
        found = _order(found)
        base = next((s for s in found if s.get("baseline")), None)
        summary = pd.DataFrame(
            [
                {
                    "policy": s["policy"],
                    "largest batch that fit": largest(s),
                    "smallest that did not": s["smallest_failed"],
                    "why it stopped": s["stopped_by"],
                }
                for s in found
            ]
        )
        out.append({
            "title": " · ".join(key),
            "limit": _limit(found),
            "sentences": [sentence(s, base) for s in found if base and s is not base],
            "table": plain_table(summary),
            "peaks": _peaks_table(found),
        })
    return {"groups": out, "published": published_small_card(published)}
