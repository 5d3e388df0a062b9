"""The trainer of a train or probe job: the engine, started in the variant's Python once per
repeat of a comparison group (or once for the probe), and what became of it.

A trainer that dies of a signal, or crosses train.memory_limit_mb, leaves evidence for an
outcome (core/outcomes.py), and the engine's progress file says whose turn it was; any other
failure fails the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mptbench.core.contract import ProbeJob, ProbeResult, RepeatJob, RepeatResult, Run
from mptbench.jobs.launcher import Engine, EngineFailed, environment

TrainerFailed = EngineFailed  # the trainer exited with an error: its log holds the traceback


@dataclass
class Death:
    """A trainer that died: the outcome and reason the evidence gives, and the policy whose
    turn it was (None when the engine had not said)."""

    outcome: str
    reason: str
    policy: str | None


class Trainer:
    """One comparison group's engine: its job files beside the first record, and how each
    repeat ended."""

    def __init__(
        self,
        python: str,
        runs: list[Run],
        records: list[str],
        profile_dirs: list[str | None] | None = None,
    ):
        self.runs = list(runs)
        self.records = [Path(r) for r in records]
        names = [r.policy.name for r in runs]
        self.profile_dirs = dict(zip(names, profile_dirs or [], strict=False))
        first = self.records[0]
        self.out = first.with_name(f".{first.name}.out")
        self.progress = first.with_name(f".{first.name}.progress")
        # Each finished record, kept until MLflow has it: Snakemake removes a failed job's
        # outputs, not these files, so a rerun logs them instead of training again.
        self.pending = [r.with_name(f".{r.name}.pending") for r in self.records]
        run = self.runs[0]
        self.engine = Engine(
            python, environment(run.variant.env, run.device.name, run.backend.name)
        )

    @property
    def run(self) -> Run:
        return self.runs[0]

    def repeat(self, prepared: str, repeat: int, runs: list[Run]) -> RepeatResult | Death:
        """One repeat of `runs` (the arms still timing); or, when the trainer died, how. The
        first train.repeats (the first stage) time the input and run the synthetic twins; the
        first train.profile_repeats are profiled. The processes added for precision only time
        steps: what they are for is the speedup's interval."""
        train = runs[0].train
        profiled = repeat < train.profile_repeats
        dirs = tuple(self.profile_dirs.get(r.policy.name) if profiled else None for r in runs)
        job = RepeatJob(str(self.out), tuple(runs), prepared, repeat, dirs, str(self.progress),
                        twins=repeat < train.repeats)
        self.progress.unlink(missing_ok=True)
        try:
            finished = self.engine.launch(job, RepeatResult, runs[0].train.memory_limit_mb)
            if finished.death:
                turn = self.progress.read_text().strip() if self.progress.exists() else None
                return Death(*finished.death, turn or None)
        finally:
            self.progress.unlink(missing_ok=True)
        for arm in finished.result.arms:
            arm.cpu_percent = finished.cpu_percent
        return finished.result

    def probe(self, prepared: str) -> ProbeResult:
        job = ProbeJob(str(self.out), self.run, prepared)
        finished = self.engine.launch(job, ProbeResult, self.run.train.memory_limit_mb)
        if finished.death:
            raise TrainerFailed(f"the probe's trainer died: {finished.death[1]}")
        return finished.result
