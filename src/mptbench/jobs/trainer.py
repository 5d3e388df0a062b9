"""The trainer of a train or probe job: the engine, started in the variant's Python once per
repeat (or once for the probe), and what became of it.

A trainer that dies of a signal, or crosses train.memory_limit_mb, leaves evidence for an
outcome (core/outcomes.py); any other failure fails the job.
"""

from __future__ import annotations

from pathlib import Path

from mptbench.core.jobs import ProbeJob, ProbeResult, RepeatJob, RepeatResult, Run
from mptbench.jobs.launcher import Engine, EngineFailed, environment

TrainerFailed = EngineFailed  # the trainer exited with an error: its log holds the traceback


class Trainer:
    """One cell's engine: its job files beside the record, and how each repeat ended."""

    def __init__(self, python: str, run: Run, record: str, profile_dir: str | None = None):
        self.run, self.profile_dir = run, profile_dir
        record = Path(record)
        self.out = record.with_name(f".{record.name}.out")
        # The finished record, kept until MLflow has it: Snakemake removes a failed job's
        # outputs, not this file, so a rerun logs it instead of training again.
        self.pending = record.with_name(f".{record.name}.pending")
        self.engine = Engine(
            python, environment(run.variant.env, run.device.name, run.backend.name)
        )

    def repeat(self, prepared: str, repeat: int) -> RepeatResult | tuple[str, str]:
        """One repeat's result; or, when its trainer died, (outcome, reason). The first repeat
        is profiled after its timed steps (train.profile_steps)."""
        profile_dir = self.profile_dir if repeat == 0 else None
        job = RepeatJob(str(self.out), self.run, prepared, repeat, profile_dir)
        finished = self.engine.launch(job, RepeatResult, self.run.train.memory_limit_mb)
        if finished.death:
            return finished.death
        finished.result.cpu_percent = finished.cpu_percent
        return finished.result

    def probe(self, prepared: str) -> ProbeResult:
        job = ProbeJob(str(self.out), self.run, prepared)
        finished = self.engine.launch(job, ProbeResult, self.run.train.memory_limit_mb)
        if finished.death:
            raise TrainerFailed(f"the probe's trainer died: {finished.death[1]}")
        return finished.result
