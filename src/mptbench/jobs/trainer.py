"""The trainer of a train or probe job: the engine, started in the variant's Python once per
repeat of a comparison group (or once for the probe), and what became of it.

A trainer that dies of a signal, or crosses train.kill_above_mb, leaves evidence for an
outcome (core/outcomes.py), and the engine's progress file says whose turn it was; any other
failure fails the job.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from mptbench.core import isa
from mptbench.core.contract import (
    ContractError,
    ProbeJob,
    ProbeResult,
    RepeatJob,
    RepeatResult,
    Run,
    decode,
    encode,
)
from mptbench.core.files import read_json, write_json
from mptbench.jobs import memory
from mptbench.jobs.launcher import Engine, EngineFailed, run_environment

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
    repeat ended. With `keep` (a train job's), each finished process is kept beside them (with
    the runs it timed) until the group's records are written: a job stopped halfway runs only
    what it had not finished when it is run again."""

    def __init__(
        self,
        python: str,
        runs: list[Run],
        records: list[str],
        profile_dirs: list[str | None] | None = None,
        keep: bool = False,
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
        self._kept = first.with_name(f".{first.name}.repeat{{}}.json") if keep else None
        run = self.runs[0]
        self.engine = Engine(
            python, run_environment(run)
        )
        # Each policy's step the probe predicted: how long the timing run's epochs are.
        self.predicted_s: dict[str, float] = {}

    @property
    def run(self) -> Run:
        return self.runs[0]

    def repeat(self, prepared: str, repeat: int, runs: list[Run]) -> RepeatResult | Death:
        """One repeat of `runs` (the arms still timing); or, when the trainer died, how. The
        first train.repeats (the first stage) time the input and run the synthetic twins; the
        first train.profile_repeats are profiled (under train.plan fast, where a policy is
        timed against the baseline). The processes added for precision only time
        steps: what they are for is the speedup's interval."""
        kept = self._kept_process(repeat, runs)
        if kept is not None:
            print(f"repeat {repeat + 1}: kept from an earlier attempt (not run again)", flush=True)
            return kept
        finished = self._launch(prepared, repeat, runs)
        if self._kept is not None:
            held = encode(finished) if isinstance(finished, RepeatResult) else asdict(finished)
            write_json(str(self._kept).format(repeat), {"runs": encode(runs), "repeat": held,
                                                        "died": isinstance(finished, Death)})
        return finished

    def _kept_process(self, repeat: int, runs: list[Run]) -> RepeatResult | Death | None:
        """A process an earlier attempt finished with the same runs, if one is kept."""
        if self._kept is None:
            return None
        path = Path(str(self._kept).format(repeat))
        try:
            kept = read_json(path) if path.exists() else None
            if not kept or kept.get("runs") != encode(runs):
                return None
            if kept["died"]:
                return Death(**kept["repeat"])
            found = decode(RepeatResult, kept["repeat"])
        except (ValueError, KeyError, TypeError, ContractError):  # cut short, or another version
            return None
        # A profiled process's profiles went with the job's outputs: it is run again.
        profiles = [a.profile.dir for a in found.arms if a.profile]
        return None if any(not Path(d).is_dir() for d in profiles) else found

    def forget(self) -> None:
        """The group's records are written: its kept processes go."""
        if self._kept is None:
            return
        for path in self._kept.parent.glob(self._kept.name.format("*")):
            path.unlink(missing_ok=True)

    def _launch(self, prepared: str, repeat: int, runs: list[Run]) -> RepeatResult | Death:
        train = runs[0].train
        # Under plan fast a group timing its baseline alone has no comparison to explain.
        compares = any(not r.policy.baseline for r in runs)
        profiled = repeat < train.profile_repeats and (compares or train.plan == "full")
        dirs = tuple(self.profile_dirs.get(r.policy.name) if profiled else None for r in runs)
        job = RepeatJob(str(self.out), tuple(runs), prepared, repeat, dirs, str(self.progress),
                        twins=repeat < train.repeats, predicted_s=dict(self.predicted_s))
        self.progress.unlink(missing_ok=True)
        try:
            finished = self.engine.launch(job, RepeatResult, memory.trainer_limit(runs[0]))
            if finished.death:
                turn = self.progress.read_text().strip() if self.progress.exists() else None
                return Death(*finished.death, turn or None)
        finally:
            self.progress.unlink(missing_ok=True)
        dtypes = {r.policy.name: r.policy.compute_dtype for r in runs}
        for arm in finished.result.arms:
            arm.cpu_percent = finished.cpu_percent
            if repeat < train.profile_repeats and not profiled and train.profile_steps:
                arm.profile_note = ("not profiled: no other policy timed beside it to explain "
                                    "(train.plan=full profiles it)")
            arm.process_phases_s = dict(finished.result.phases_s)
            if finished.kernels is not None:
                dtype = isa.ONEDNN_DTYPES.get(dtypes.get(arm.policy, ""), "?")
                arm.fingerprint.update(finished.kernels.facts(dtype))
        return finished.result

    def probe(self, prepared: str) -> ProbeResult:
        """The probe of the group's first cell; where its trainer died (a refused kernel's
        abort, an OOM kill, a crash), a probe of no step with that outcome, as a train job's
        cell gets one."""
        run = self.run
        job = ProbeJob(str(self.out), run, prepared)
        finished = self.engine.launch(job, ProbeResult, memory.trainer_limit(run))
        if finished.death:
            outcome, reason = finished.death
            print(f"probe: {outcome}: {reason}", flush=True)
            found = ProbeResult(backend=run.backend.name, variant=run.cell.variant,
                                device=run.cell.device, policy=run.policy.name,
                                image_size=int(read_json(prepared)["image_size"]), points=[],
                                outcome=outcome, reason=reason)
        else:
            found = finished.result
        if finished.kernels is not None:  # what oneDNN built: a cell the probe ends records it
            dtype = isa.ONEDNN_DTYPES.get(run.policy.compute_dtype, "?")
            found.fingerprint.update(finished.kernels.facts(dtype))
        return found
