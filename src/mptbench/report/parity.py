"""Does it still learn: per comparison group, each mixed policy's loss beside the baseline's
from the same seed and data order (the parity rule), the gap at the end against the baseline's
own seed-to-seed spread, and under loss scaling the scale and the skipped steps. One sentence
per policy and batch size, each citing its figures; a plot of the loss curves per group."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mptbench.core.cells import GROUP_AXES, key_of
from mptbench.core.outcomes import Outcome
from mptbench.report.plots import plt, png

# summary.csv's parity columns and the figure each comes from.
COLUMNS = {
    "parity_verdict": "verdict",
    "parity_end_gap": "gap",
    "parity_seed_spread": "seed_spread",
    "parity_skipped_steps": "skipped_steps",
    "parity_val_accuracy": "val_accuracy",
}


def _scale(figures: dict) -> str:
    if figures.get("initial_loss_scale") is None:
        return ""
    skipped = figures["skipped_steps"]
    return (
        f"; loss scale {figures['initial_loss_scale']:g} at the start, "
        f"{figures['final_loss_scale']:g} at the end (lowest {figures['min_loss_scale']:g}), "
        f"{skipped} step{'s' if skipped != 1 else ''} skipped for non-finite gradients"
    )


def _accuracy(figures: dict, baseline: str) -> str:
    if figures.get("val_accuracy") is None:
        return ""
    spread = figures.get("val_accuracy_seed_spread")
    own = f", its own seed-to-seed spread {spread:.3f}" if spread is not None else ""
    return (f"; validation accuracy {figures['val_accuracy']:.3f} against {baseline}'s "
            f"{figures['baseline_val_accuracy']:.3f}{own}")


def sentence(policy: str, figures: dict, baseline: str, batch: int, steps: int) -> str:
    """'mixed_float16 at batch 8 follows float32 over 200 steps: ...' with its figures."""
    head = f"{policy} at batch {batch}, {steps} steps"
    verdict = figures["verdict"]
    if verdict in ("failed", "diverged"):
        return f"{head}: {verdict}: {figures['why']}{_scale(figures)}."
    if verdict == "unclear":
        return f"{head}: unclear ({figures['why']}){_scale(figures)}."
    numbers = (
        f"end loss {figures['end_loss']:.4f} against {baseline}'s "
        f"{figures['baseline_end_loss']:.4f}"
        f" (gap {figures['gap']:+.4f}; {baseline}'s own seed-to-seed spread "
        f"{figures['seed_spread']:.4f})"
    )
    said = f"follows {baseline}" if verdict == "follows the baseline" else verdict
    more = _scale(figures) + _accuracy(figures, baseline)
    return f"{head}: {said}, {figures['why']}: {numbers}{more}."


def learning_sections(parity: list[dict]) -> list[dict[str, Any]]:
    """Per report group: its sentences (and what was left out, why)."""
    grouped: dict[tuple, list[dict]] = {}
    for p in parity:
        grouped.setdefault(key_of(p), []).append(p)
    out = []
    for key, found in sorted(grouped.items()):
        lines, notes = [], []
        for p in sorted(found, key=lambda p: p["batch_size"]):
            for name, why in (p.get("left_out") or {}).items():
                notes.append(f"{name} at batch {p['batch_size']}: {why}")
            if p.get("shortened"):
                notes.append(f"batch {p['batch_size']}: {p['shortened']}")
            if p.get("outcome") != Outcome.OK:
                if not p.get("left_out"):  # else each policy's why is said above
                    notes.append(f"batch {p['batch_size']}: {p.get('outcome')}")
                continue
            for name, figures in p["policies"].items():
                if figures["verdict"] != "baseline":
                    lines.append(sentence(name, figures, p["baseline"], p["batch_size"],
                                          p["steps"]))
        out.append({"title": " · ".join(key), "key": key, "sentences": lines, "notes": notes})
    return out


def learning_figure(found: list[dict], title: str) -> bytes:
    """Each batch size's loss curves: the baseline (two seeds), each policy from the first."""
    ran = sorted(
        (p for p in found if p.get("outcome") == Outcome.OK), key=lambda p: p["batch_size"]
    )
    fig, axes = plt.subplots(1, max(1, len(ran)), figsize=(5 * max(1, len(ran)), 3.6),
                             squeeze=False)
    if not ran:
        axes[0][0].text(0.5, 0.5, "not run (train.parity_steps=0, over the budget, or no "
                        "candidate)", ha="center", transform=axes[0][0].transAxes)
        axes[0][0].axis("off")
    for ax, p in zip(axes[0], ran, strict=False):
        for i, run in enumerate(p["runs"]):
            second = i == len(p["runs"]) - 1
            label = f"{run['policy']} (seed {run['seed']})"
            losses = [float("nan") if v is None else v for v in run["losses"]]
            style = {"linestyle": ":", "color": "C0"} if second else {"color": f"C{i}"}
            ax.plot(range(1, len(losses) + 1), losses, label=label, linewidth=1, **style)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.set_title(f"batch {p['batch_size']}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return png(fig)


def parity_columns(summary: pd.DataFrame, parity: list[dict]) -> pd.DataFrame:
    """Each cell's parity figures in its summary row (the baseline's row: "baseline")."""
    summary["parity_verdict"] = summary["parity_verdict"].astype(object)
    for p in parity:
        for policy, figures in (p.get("policies") or {}).items():
            hit = (summary["policy"] == policy) & (summary["batch_size"] == p["batch_size"])
            for axis, value in zip(GROUP_AXES, key_of(p), strict=True):
                hit &= summary[axis] == value
            for column, name in COLUMNS.items():
                if figures.get(name) is not None:
                    summary.loc[hit, column] = figures[name]
    return summary
