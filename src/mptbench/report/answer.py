"""The answer the report opens with, per machine, model and device, in words: a lead a reader
can act on (the decision, the factor with its interval, a whole training run before and after)
and the details in short sentences of their own (the throughputs, how the interval was made,
the paired comparison, fit and parity, the cells left out, a slowed host). report/choice.py
makes the choice; this module only words it. The same lead opens the report, headline.txt (and
so the terminal's last lines) and the sweep's MLflow run's `answer.*` tag.

A whole run is what `fit` spends on the experiment's train.epochs where that is more than one
epoch, else on the 2020 experiment's run (20 epochs, validation after each): the cell's steps,
validation passes and first epoch's one-time extra, each measured in its processes (summary.csv
fullrun_s: core/fullrun.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mptbench.core import epochs, fullrun, stats
from mptbench.core.host import HOST_TOLERANCE
from mptbench.core.outcomes import Outcome
from mptbench.report import choice as choices
from mptbench.report.choice import Choice, memory_check, within
from mptbench.report.recipe import recipe
from mptbench.report.summary import baseline_name

# Where an answer is: summary.csv's columns that name it.
WHERE = ["machine", "model", "device"]
LEARNED = {
    "follows the baseline": "learns as {baseline} does (parity check)",
    "ends lower": "ended with a lower loss than {baseline} (parity check)",
    "unclear": "the parity check was unclear",
}
SHOWN_LEFT_OUT = 3  # faster cells left out, named; the rest counted


@dataclass(frozen=True)
class Answer:
    """One machine, model and device's answer: its choice, its lead and its details."""

    choice: Choice
    lead: str
    details: tuple[str, ...]
    recipe: str | None = None  # the chosen configuration in a user's code (report/recipe.py)

    @property
    def where(self) -> tuple[str, str, str]:
        return self.choice.where


def _unit(seconds: float) -> tuple[str, int]:
    """The unit a time's size asks for: its name and its seconds."""
    return ("s", 1) if seconds < 120 else ("min", 60) if seconds < 7200 else ("h", 3600)


def run_time(row: pd.Series | None, with_interval: bool = False,
             after: pd.Series | None = None) -> str | None:
    """'47 min', or '47 min (45–49)': the cell's whole run; said `after` another cell's, in a
    unit no larger than that one's ('119 s → 58 s', never '119 s → 2.0 min'); None where it has
    none."""
    if row is None or pd.isna(row.get("fullrun_s")):
        return None
    seconds = float(row["fullrun_s"])
    name, size = _unit(seconds)
    if after is not None and pd.notna(after.get("fullrun_s")):
        name, size = min((name, size), _unit(float(after["fullrun_s"])), key=lambda u: u[1])
    places = 1 if seconds / size < 10 else 0
    said = f"{seconds / size:.{places}f} {name}"
    ends = [row.get(c) for c in ("fullrun_s_ci_low", "fullrun_s_ci_high")]
    if not with_interval or any(pd.isna(e) for e in ends):
        return said
    low, high = (f"{float(e) / size:.{places}f}" for e in ends)
    return f"{said} ({low}–{high})"


def _ips(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _several(rows: pd.DataFrame) -> list[str]:
    return [k for k in ("backend", "variant") if rows[k].nunique() > 1]


def batch_words(row: pd.Series, rows: pd.DataFrame) -> str:
    """'batch 256', with its backend and variant where several ran: 'batch 256 on jax'."""
    named = " · ".join(str(row[k]) for k in _several(rows))
    return f"batch {int(row['batch_size'])}" + (f" on {named}" if named else "")


def configuration(row: pd.Series, rows: pd.DataFrame) -> str:
    """'mixed_bfloat16 at batch 256', with its backend and variant where several ran."""
    return f"{row['policy']} at {batch_words(row, rows)}"


# A device whose kernels a variant capped (variant.<name>.isa): an answer of its own, as if
# another CPU (a cap is a generation of CPU, not a setting to choose), keyed "cpu.isa_AVX2".
CAPPED = ".isa_"


def _where(key: tuple[str, str, str], several_machines: bool) -> str:
    machine, model, device = key
    device, _, cap = device.partition(CAPPED)
    where = f"{model} on {device} of {machine}" if several_machines else f"{model} on {device}"
    return f"{where}, kernels capped at {cap}" if cap else where


def by_generation(key: tuple[str, str, str], rows: pd.DataFrame):
    """(key, rows) per instruction-set cap the rows ran under: the uncapped ones under `key`,
    each cap's under its own (see CAPPED)."""
    caps = rows["isa_cap"] if "isa_cap" in rows else pd.Series(None, index=rows.index)
    for cap in dict.fromkeys(c if isinstance(c, str) else None for c in caps):
        mine = rows[caps.isna()] if cap is None else rows[caps == cap]
        yield (key if cap is None else (key[0], key[1], f"{key[2]}{CAPPED}{cap}")), mine


def _first(rows: pd.DataFrame, column: str):
    """The first value a column holds among the rows, None where none does."""
    if column not in rows:
        return None
    found = rows[column].dropna()
    return found.iloc[0] if len(found) else None


def run_words(rows: pd.DataFrame) -> str:
    """'20 epochs with validation': the whole run the times are of."""
    epochs = _first(rows, "fullrun_epochs")
    if epochs is None:
        return "a whole run"
    validates = " with validation" if _first(rows, "fullrun_validates") else ""
    return f"{int(epochs)} epoch{'s' if int(epochs) != 1 else ''}{validates}"


def _ratio(estimate: stats.Estimate, of: str = "") -> str:
    """'1.74× float32's best (1.35–2.24)': the factor, what it is of, its interval."""
    of = f" {of}" if of else ""
    if estimate.low is None:
        return f"{estimate.value:.2f}×{of} (no interval)"
    return f"{estimate.value:.2f}×{of} ({estimate.low:.2f}–{estimate.high:.2f})"


def _times(rows: pd.DataFrame, before: pd.Series | None, after: pd.Series | None) -> str:
    """'; 20 epochs with validation: 2.6 h → 1.5 h', or one time alone; '' where none."""
    first, then = run_time(before), run_time(after, after=before)
    if first is None and then is None:
        return ""
    if first is None or then is None or after is before:
        return f"; {run_words(rows)}: {first or then}"
    return f"; {run_words(rows)}: {first} → {then}"


def _learned(row: pd.Series) -> str | None:
    """The cell's parity verdict where it says the policy learns (a LEARNED key), else None."""
    verdict = row.get("parity_verdict")
    return verdict if isinstance(verdict, str) and verdict in LEARNED else None


def _unlearned(row: pd.Series) -> str:
    """'; parity not checked' where the configuration to use has no parity verdict that says
    it learns: the lead never leaves that unsaid."""
    return "" if _learned(row) else "; parity not checked"


def lead(c: Choice, rows: pd.DataFrame, baseline: str | None) -> str:
    """At most about 25 words: the decision, the factor with its interval, the whole run, and
    for a policy to use, "parity not checked" where no parity check said it learns."""
    name = baseline or "the baseline"
    if c.decision == choices.NOTHING:
        return f"No answer: no cell ran ok, fit and learned no worse than {name}."
    if c.decision == choices.BASELINE_ONLY:
        return (f"Keep {name}: no other policy ran ok, fit and learned no worse"
                f"{_times(rows, c.base, c.base)}.")
    if c.decision == choices.NO_BASELINE:
        return (f"No {baseline or 'baseline'} cell ran ok and fit: nothing to compare; fastest "
                f"{configuration(c.chosen, rows)}{_times(rows, c.chosen, c.chosen)}.")
    mine = configuration(c.top, rows)
    same = all(c.base[k] == c.top[k] for k in _several(rows))  # its backend and variant
    at_base = f"{name} at batch {int(c.base['batch_size'])}" if same else (
        f"{name} at {batch_words(c.base, rows)}")
    at_base += ", paired"
    if c.decision == choices.USE:
        factor = (_ratio(c.paired.estimate, at_base) if c.by_pair
                  else _ratio(c.estimate, f"{name}'s best"))
        return f"Use {mine}: {factor}{_times(rows, c.base, c.top)}{_unlearned(c.chosen)}."
    if c.decision == choices.UNJUDGED:  # one process a cell: no spread, so no interval
        return (f"No verdict: {mine} runs {c.estimate.value:.2f}× {name}'s best, with no "
                f"interval to judge by{_times(rows, c.base, c.top)}.")
    if c.too_few:
        return (f"Keep {name}: too few processes to tell {c.top['policy']} "
                f"({c.estimate.value:.2f}×) from it{_times(rows, c.base, c.base)}.")
    if c.by_pair:  # slower in the processes shared, where the ratio tells nothing
        return (f"Keep {name}: {c.paired.row['policy']} is slower, "
                f"{_ratio(c.paired.estimate, at_base)}{_times(rows, c.base, c.base)}.")
    verdict = stats.Verdict.SLOWER if c.verdict == stats.Verdict.SLOWER else stats.Verdict.SAME
    factor = _ratio(c.estimate, f"{name}'s best")
    return (f"Keep {name}: {c.top['policy']}'s best is {factor}, {verdict}"
            f"{_times(rows, c.base, c.base)}.")


def _throughputs(c: Choice, rows: pd.DataFrame, baseline: str) -> str | None:
    """'mixed_bfloat16 at batch 128: 35.9 images/s; float32's best, at batch 64: 20.6.'"""
    if c.top is None or c.base is None:
        return None
    return (f"{configuration(c.top, rows)}: {_ips(c.top['images_per_sec'])} images/s; "
            f"{baseline}'s best, at {batch_words(c.base, rows)}: "
            f"{_ips(c.base['images_per_sec'])} images/s.")


def _how(c: Choice, rows: pd.DataFrame, baseline: str) -> str | None:
    """'The interval is widened for the best of 7 against float32's best of 4 and the two
    comparisons, timed in different processes.' Where the paired comparison decided, the
    direct ratio with it."""
    if c.estimate is None or c.estimate.low is None or c.too_few:
        return None
    chosen = [f"the best of {c.others}"] if c.others > 1 else []
    chosen += [f"{baseline}'s best of {c.bases}"] if c.bases > 1 else []
    widened = " against ".join(chosen)
    if c.comparisons > 1:
        widened = f"{widened} and the two comparisons" if widened else "the two comparisons"
    why = f"widened for {widened}" if widened else "the cells' own"
    apart = "timed in different processes" if c.apart else "timed in the same processes"
    if c.by_pair:
        return (f"{configuration(c.top, rows)} against {baseline}'s best, at "
                f"{batch_words(c.base, rows)}: {_ratio(c.estimate)}, {apart}, {why}.")
    return f"The interval is {why}, {apart}."


def _paired_words(c: Choice, rows: pd.DataFrame, baseline: str) -> str | None:
    """'At float32's best, batch 64, mixed_bfloat16 runs 1.73× as fast (1.54–1.95), paired in
    the same processes.': a figure beside the lead's, no second verdict."""
    if c.paired is None or c.by_pair or c.too_few:
        return None
    p = c.paired
    return (f"At {baseline}'s best, {batch_words(c.base, rows)}, {p.row['policy']} runs "
            f"{_ratio(p.estimate, 'as fast')}, paired in the same processes.")


def _checks(c: Choice, rows: pd.DataFrame, baseline: str) -> str | None:
    """'It fits in the device's memory; parity not checked.'"""
    row = c.chosen
    if row is None:
        return None
    fits = memory_check(row)
    memory = ": fit not checked" if fits is None else f" fits {within(row)}"
    said = f"{configuration(row, rows)}{memory}"
    if c.decision in (choices.KEEP, choices.BASELINE_ONLY):
        return f"{said}."
    verdict = _learned(row)
    learns = LEARNED[verdict].format(baseline=baseline) if verdict else "parity not checked"
    return f"{said}; {learns}."


def _seconds(seconds: float) -> str:
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s" if seconds < 120 else (
        f"{seconds / 60:.1f} min")


def _epoch_words(c: Choice, rows: pd.DataFrame) -> str | None:
    """'float32's epochs start at two speeds: 7 of 12 timed epoch starts waited for ...': where
    a shown cell's epoch starts waited for the last epoch's tf.data tuning thread
    (core/epochs.py), how often, how long, and what it comes to in the whole run; then what
    to try."""
    said = []
    shown = [c.base, *([c.top] if c.top is not c.base else [])]
    for row in shown:
        waited = None if row is None else row.get("epoch_starts_waited")
        if waited is None or pd.isna(waited) or waited <= 0:
            continue
        waited, timed = int(waited), int(row["epoch_starts_timed"])
        whole = (f", {_seconds(float(row['fullrun_epoch_wait_s']))} each on average at this "
                 f"run's epoch length{_wake_words(row)}: "
                 f"{_seconds(float(row['fullrun_epoch_starts_s']))} of its whole run"
                 if pd.notna(row.get("fullrun_epoch_wait_s")) else "")
        said.append(f"{configuration(row, rows)}: {waited} of {timed} timed epoch starts waited "
                    f"for the last epoch's tf.data tuning thread (up to "
                    f"{_seconds(float(row['epoch_wait_most_ms']) / 1000)} here{whole})")
    if not said:
        return None
    return (f"Epochs start at two speeds: {'; '.join(said)}. {epochs.SHARE_CAVEAT}. To start "
            f"every epoch at once, {epochs.REMEDY}.")


def _wake_words(row: pd.Series) -> str:
    """' (its epochs, about 9.8 s, end near the thread's wake at 10 s: a start that waits
    loses from nearly nothing to 10 s)', where a wake lies within the epochs' spread; else ''."""
    wake, epoch = row.get("fullrun_epoch_wake_s"), row.get("fullrun_epoch_s")
    if wake is None or pd.isna(wake) or epoch is None or pd.isna(epoch):
        return ""
    wake = float(wake)
    return (f" (its epochs, about {_seconds(float(epoch))}, end near the thread's wake at "
            f"{_seconds(wake)}: a start that waits loses from nearly nothing to "
            f"{_seconds(epochs.period_from(wake))})")


def _left_out_words(c: Choice, rows: pd.DataFrame) -> str | None:
    """The cells left out that ran faster than the answer, fastest first, with why."""
    above = c.chosen["images_per_sec"] if c.chosen is not None else 0
    faster = [p for p in c.left_out if p[0]["images_per_sec"] > above]
    if not faster:
        return None
    named = [f"{configuration(r, rows)} ({why})" for r, why in faster[:SHOWN_LEFT_OUT]]
    more = len(faster) - SHOWN_LEFT_OUT
    label = "Faster but left out" if above else "Left out"
    return f"{label}: " + ", ".join(named) + (f" and {more} more." if more > 0 else ".")


def _host_words(c: Choice) -> str | None:
    """'The host ran up to 1.8× slower than its own while these were timed; their intervals
    are widened for it.' (core/host.py); None where it held its speed."""
    shown = [r for r in (c.base, c.top) if r is not None]
    most = max((float(r["host_slowdown_most"]) for r in shown
                if pd.notna(r.get("host_slowdown_most"))), default=1.0)
    if most <= 1 + HOST_TOLERANCE:
        return None
    widened = any(float(r.get("host_widening") or 0) > 0 for r in shown)
    said = f"The host ran up to {most:.2g}× slower than its own while these were timed"
    return said + ("; their intervals are widened for it." if widened else
                   ", in some processes; their spread is in the intervals.")


def _run_words(c: Choice, rows: pd.DataFrame) -> str | None:
    """'20 epochs of imagenette2-320 with validation after each (the 2020 experiment's run):
    float32 at batch 64 2.6 h (2.4–2.8), mixed_bfloat16 at batch 128 1.5 h (1.4–1.6).'"""
    shown = [r for r in (c.base, c.top) if r is not None]
    times = [(configuration(r, rows), run_time(r, True, shown[0] if i else None))
             for i, r in enumerate(shown)]
    if not times or all(t is None for _, t in times):
        notes = [str(r["fullrun_note"]) for r in shown if pd.notna(r.get("fullrun_note"))]
        return f"A whole run's time is not known ({notes[0] if notes else 'not measured'})."
    dataset = ", ".join(str(d) for d in rows["dataset"].dropna().unique()) or "its dataset"
    source = _first(rows, "fullrun_source")
    which = "the 2020 experiment's run" if source == fullrun.PUBLISHED else source
    run = run_words(rows).replace(" with validation", " with validation after each")
    run = run.replace("epochs", f"epochs of {dataset}", 1) + (f" ({which})" if which else "")
    each = ", ".join(f"{name} {t or 'not known'}" for name, t in times)
    return f"{run}: {each}."


def _unsupported_words(rows: pd.DataFrame) -> str | None:
    """'Unsupported here: mixed_bfloat16 (oneDNN: could not create ...).': the policies no cell
    of which ran, because the device (or its cap) has no kernel for them."""
    refused = rows[rows["outcome"] == Outcome.UNSUPPORTED]
    ran = set(rows.loc[rows["outcome"] == Outcome.OK, "policy"])
    named = [f"{policy} ({next(iter(mine['reason'].dropna()), 'no reason recorded')})"
             for policy, mine in refused.groupby("policy", sort=False) if policy not in ran]
    return f"Unsupported here: {', '.join(named)}." if named else None


def details(c: Choice, rows: pd.DataFrame, baseline: str) -> tuple[str, ...]:
    """The short sentences after the lead."""
    found = (_throughputs(c, rows, baseline), _how(c, rows, baseline),
             _paired_words(c, rows, baseline), _checks(c, rows, baseline), _run_words(c, rows),
             _epoch_words(c, rows), _left_out_words(c, rows), _unsupported_words(rows),
             _host_words(c))
    return tuple(s for s in found if s)


def answer_of(key: tuple[str, str, str], rows: pd.DataFrame, several_machines: bool) -> Answer:
    """The answer for one machine, model and device (every backend and variant it ran)."""
    named = baseline_name(rows)
    baseline = named or "the baseline"
    found = choices.choose(key, rows, baseline)
    said = f"{_where(key, several_machines)}: {lead(found, rows, named)}"
    return Answer(found, said, details(found, rows, baseline), recipe(found))


def answers(summary: pd.DataFrame) -> list[Answer]:
    """One per machine, model and device (and instruction-set cap), in the summary's order."""
    several = summary["machine"].nunique() > 1
    return [
        answer_of(where, mine, several)
        for key, rows in summary.groupby(WHERE, sort=True)
        for where, mine in by_generation(tuple(map(str, key)), rows)
    ]

