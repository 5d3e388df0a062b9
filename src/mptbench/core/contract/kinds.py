"""Every kind of engine job, declared once: the table the plan, the rules, the engine's entry
point and the report iterate over.

A kind's one name (`feature`) is its modules' in every package that has one: engine/<feature>.py
(whose `run(job, start)` does it in the variant's Python), jobs/<feature>.py (the Snakemake
job's side), workflow/scripts/<feature>.py and its rule, and report/<feature>.py where the
report reads its outputs. Where its rule writes one output per probe cell or comparison group,
the table says the folder (plan/layout.py makes the paths); where the report reads those
outputs, what it calls one (report/merge.py, report/aggregate.py and the aggregate rule's
inputs follow) and when the plan asks for them (plan/inputs.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from mptbench.core.contract import jobs as j
from mptbench.core.contract import results as r

# What one output of a kind stands for: the wildcards of its path (plan/layout.py KEYS).
PER_PROBE_CELL, PER_COMPARISON = "probe_cell", "comparison"


def _always(cfg: dict[str, Any]) -> bool:
    return True


def _fit_search(cfg: dict[str, Any]) -> bool:
    return bool(cfg["sweep"]["fit_search"])


def _compared(cfg: dict[str, Any]) -> bool:
    """Parity runs where train.parity_steps is set and a baseline policy has another policy to
    be compared with (a policy's yaml may leave `baseline` out: only one says it)."""
    policies = cfg["policy"].values()
    has_baseline = any(policy.get("baseline") for policy in policies)
    return bool(cfg["train"]["parity_steps"] and has_baseline and len(policies) > 1)


@dataclass(frozen=True)
class JobKind:
    """One kind of engine job: its job and result dataclasses, its one name, and where its
    rule's outputs go and who reads them."""

    job: type
    result: type
    feature: str
    folder: str = ""  # its outputs: results/<experiment>/<folder>/<keyed_by's path>.json
    keyed_by: str = ""
    reported: str = ""  # what the report calls one output, where it reads them
    wanted: Callable[[dict[str, Any]], bool] = _always  # does the plan ask for its outputs

    @property
    def name(self) -> str:
        """What its job file says it is (`kind` in the JSON)."""
        return self.job.KIND


KINDS: dict[str, JobKind] = {
    kind.name: kind
    for kind in (
        JobKind(j.RepeatJob, r.RepeatResult, "repeat"),
        JobKind(j.ProbeJob, r.ProbeResult, "probe", folder="probes", keyed_by=PER_PROBE_CELL),
        JobKind(j.CalibrateJob, r.Calibration, "calibrate"),
        JobKind(j.DescribeJob, r.ModelInfo, "model_info"),
        JobKind(j.EnvironmentJob, r.EnvironmentFacts, "environment"),
        JobKind(j.FitJob, r.FitResult, "fits", folder="fits", keyed_by=PER_PROBE_CELL,
                reported="fits search", wanted=_fit_search),
        JobKind(j.ParityJob, r.ParityResult, "parity", folder="parity", keyed_by=PER_COMPARISON,
                reported="parity comparison", wanted=_compared),
    )
}
JOB_KINDS: dict[str, type] = {name: kind.job for name, kind in KINDS.items()}
EngineJob = Union[tuple(kind.job for kind in KINDS.values())]  # noqa: UP007 (built, not written)
# The kinds whose outputs the report reads, by their one name.
REPORTED: dict[str, JobKind] = {k.feature: k for k in KINDS.values() if k.reported}


def kind_of(job: Any) -> JobKind:
    """The declaration of an engine job's kind."""
    return KINDS[type(job).KIND]
