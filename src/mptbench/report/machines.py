"""The report's Machines compared section as data: per model, backend and variant measured on
several machines and devices, every machine's cells side by side with the published (2020)
machines beneath, what each was measured with, and each policy's largest batch that fit on
each; and, with several machines, each one's hosts, devices and versions. html.py renders it."""

from __future__ import annotations

import pandas as pd

from mptbench.core.frameworks import VERSION_TITLES
from mptbench.core.outcomes import Outcome
from mptbench.report.sections import device_label, unique
from mptbench.report.summary import policies
from mptbench.report.tables import cell, interleaved, policy_table

# What must agree for two machines' cells to be compared as they are.
MEASURED_WITH = {"mptbench": "mptbench",
                 **VERSION_TITLES,
                 "keras": "Keras",
                 "parameters": "parameters", "image_size": "px"}


def _measured_with(rows: pd.DataFrame) -> dict[str, str]:
    return {
        label: unique(rows[column]) for column, label in MEASURED_WITH.items() if column in rows
    }


def machine_facts(summary: pd.DataFrame) -> dict[str, str]:
    """Per machine, where there are several: its hosts, devices and versions (empty with one)."""
    if summary["machine"].nunique() < 2:
        return {}
    out = {}
    for machine, rows in summary.groupby("machine"):
        devices = "; ".join(
            f"{device}: {unique(mine['device_name'])}" for device, mine in rows.groupby("device")
        )
        versions = ", ".join(f"{k} {v}" for k, v in _measured_with(rows).items())
        out[machine] = f"Host {unique(rows['host'])}; {devices}; measured with {versions}."
    return out


def machines(summary: pd.DataFrame, published: pd.DataFrame) -> list[dict]:
    """Per model, backend and variant measured on more than one machine and device: every
    machine's cells side by side, the published (2020) machines beneath; where the records
    were measured with different versions (mptbench, TensorFlow, Keras) or a different model
    or image size, each row says with what, and a warning says they differ."""
    out = []
    for (model, backend, variant), rows in summary.groupby(["model", "backend", "variant"]):
        places = rows.groupby(["machine", "device"], sort=True)
        if places.ngroups < 2:
            continue
        pols = policies(rows)
        tables, facts = {}, {}
        for (machine, device), mine in places:
            label = f"{machine} · {device}: {device_label(mine.iloc[0]).split(' (CPU flags:')[0]}"
            tables[label], facts[label] = policy_table(mine, pols), _measured_with(mine)
        differ = sorted(
            {k for f in facts.values() for k, v in f.items() if v != next(iter(facts.values()))[k]}
        )
        notes = {
            label: cell(", ".join(f"{k} {v}" for k, v in f.items()), "fail" if differ else "text")
            for label, f in facts.items()
        }
        for device, theirs in published.groupby("device", sort=False):
            label = f"published (2020) · {device}"
            if set(pols) & set(theirs["policy"]):  # a policy it lacks reads "not run"
                tables[label] = policy_table(theirs, pols)
                notes[label] = cell("the 2020 experiment", "text")
        out.append({
            "title": f"{model} · {backend} · {variant}: {places.ngroups} machines and devices",
            "table": interleaved(
                tables, cell("machine", "text"), notes, cell("measured with", "text")
            ),
            "fits": _fits_table(dict(list(places)), published, pols),
            "warning": (
                f"Measured with different {', '.join(differ)}: these rows are not a like-for-"
                "like comparison; the 'measured with' column says what each used."
                if differ else None
            ),
        })
    return out


def _fit_of(rows: pd.DataFrame) -> dict:
    """One policy's largest batch that fit on one machine and device, as the search found it."""
    found = rows["largest_fit_batch"].dropna()
    if found.empty:
        return cell("—", "missing", "not searched (sweep.fit_search=false)")
    limit = rows["fits_search_mb"].dropna()
    return cell(int(found.max()), small=f"within {int(limit.iloc[0])} MB" if len(limit) else None)


def _published_fit(rows: pd.DataFrame) -> dict:
    """The largest batch a published device ran, and whether a larger one ran out of memory."""
    ran = rows.loc[rows["outcome"] == Outcome.OK, "batch_size"]
    if ran.empty:
        return cell("—", "missing", "not run")
    oom = (rows["outcome"] == Outcome.OOM).any()
    return cell(int(ran.max()), small="larger: OOM" if oom else "every batch tried ran")


def _fits_table(places: dict, published: pd.DataFrame, pols: list[str]) -> dict:
    """Per machine and device (the published ones beneath): each policy's largest batch that
    fit (this run's fits search; the 2020 experiment's largest that ran)."""
    head = [cell("machine", "text"), *(cell(p, small="largest batch that fit") for p in pols)]
    body = []
    for (machine, device), rows in places.items():
        label = f"{machine} · {device}"
        body.append([cell(label, "text"),
                     *(_fit_of(rows[rows["policy"] == p]) for p in pols)])
    for device, theirs in published.groupby("device", sort=False):
        body.append([cell(f"published (2020) · {device}", "text"),
                     *(_published_fit(theirs[theirs["policy"] == p]) for p in pols)])
    return {"head": head, "rows": body}
