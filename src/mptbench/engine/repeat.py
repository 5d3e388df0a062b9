"""One repeat of a comparison group, in the engine: the cells of one model, backend, variant,
device and batch size (one per policy: its arms) trained in one process, taking turns in
rounds (engine/rounds.py), each timed step kept with its round, the host's own speed timed
between turns (engine/host.py); then each ok arm's validation batches (engine/fullrun.py), its
synthetic twin, taking turns the same way, and its profile. The supervisor combines the
repeats.

The order the arms are built, started and first take their turn in rotates from one repeat to
the next (AB, BA, AB, ...), so whatever that order does to an arm falls on each in turn and is
in the spread over processes rather than in every process alike.

How a cell can end is listed in core/outcomes.py.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mptbench.core import hardware, stats
from mptbench.core.contract import ArmResult, Profiled, RepeatJob, RepeatResult, Run
from mptbench.core.files import read_json
from mptbench.core.outcomes import Outcome
from mptbench.data.synthetic import is_synthetic
from mptbench.engine import feed, timing
from mptbench.engine.backends import Session
from mptbench.engine.fingerprint import on_device
from mptbench.engine.fullrun import time_validation
from mptbench.engine.host import HostCheck
from mptbench.engine.models import build_model, jit_setting
from mptbench.engine.rounds import Rounds


@dataclass
class Arm:
    """One policy of the group in this process: its run, its model, what it measured."""

    run: Run
    result: ArmResult
    model: Any = None
    clock: timing.StepClock | None = None
    error: BaseException | None = None

    @property
    def name(self) -> str:
        return self.run.policy.name


def step_clock(run: Run, now=time.perf_counter, epochs: bool = True) -> timing.StepClock:
    """This repeat's share of the cell's time budget, and the step-time guard; past the
    cell's epochs it times up to its minimum only (`epochs` false: a run through epochs of its
    own, which its steps and budget end, not their count). `now`: the clock it reads (a
    simulation's own time, in bench/bench_coverage.py)."""
    train = run.train
    return timing.StepClock(
        train.warmup_steps,
        train.timed_steps,
        train.min_timed_steps,
        train.time_budget_s / train.repeats if train.time_budget_s else None,
        train.warmup_epochs,
        step_limit_s=train.max_step_seconds,
        warmup_seconds=train.warmup_seconds,
        epochs=train.epochs if epochs else None,
        now=now,
    )


def _build(session: Session, arm: Arm, prepared: dict) -> None:
    """The arm's model, built and compiled from the same seed as the others' (an arm that
    cannot be built for a known reason gets that outcome)."""
    size, run = prepared["image_size"], arm.run
    session.keras.utils.set_random_seed(run.seed)
    try:
        arm.model = build_model(
            run.model, (size, size, 3), len(prepared["classes"]), run.policy,
            jit_setting(run.variant.jit_compile), run.block_steps,
        )
    except Exception as exc:  # noqa: BLE001 - classified, re-raised when unknown
        _failed(session, arm, exc)
        return
    arm.result.fingerprint["xla"] = bool(arm.model.jit_compile)


def _failed(session: Session, arm: Arm, exc: BaseException) -> None:
    outcome = session.classify(exc) if isinstance(exc, Exception) else None
    if outcome is None:
        raise exc
    arm.result.outcome, arm.result.reason = outcome
    arm.model = None
    print(f"{arm.name}: {arm.result.outcome}: {arm.result.reason}", flush=True)


def _progress(path: str | None):
    """Writes the arm whose turn it is where the supervisor looks when the process dies."""
    if not path:
        return None
    return lambda arm: Path(path).write_text(arm)


def collect_apart() -> None:
    """Collects what finished fits left, in a thread of its own. Destroying a fit's tf.data
    iterator may wait for its tuning thread's period to end (core/epochs.py), up to a minute,
    wherever Python's collector reaches it: on the main thread, in the middle of the next
    timed work. Here the wait holds up nothing."""
    threading.Thread(target=gc.collect, name="collect", daemon=True).start()


def in_turns(
    arms: list[Arm], fits: dict[str, dict], clocks: dict, progress: str | None,
    between_turns=None,
) -> None:
    """Each arm's fit in its own thread, timed by its clock, taking turns in rounds (the
    first arm first); an arm whose fit raises leaves the rotation and keeps its error."""
    train = arms[0].run.train
    turns = Rounds([a.name for a in arms], train.round_samples, train.round_seconds,
                   _progress(progress), between_turns)

    def fit(arm: Arm) -> None:
        timer = timing.make_step_timer(clocks[arm.name], turns, arm.name)
        try:
            arm.model.fit(**fits[arm.name], callbacks=[timer], shuffle=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            arm.error = exc
        finally:
            turns.leave(arm.name)

    threads = [threading.Thread(target=fit, args=(arm,), name=arm.name) for arm in arms]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    collect_apart()


@dataclass(frozen=True)
class FitLength:
    """How the real steps' fit runs: its epochs, and what an epoch of its data is."""

    epochs: int
    steps_per_epoch: int | None  # given to fit: one iterator for every epoch
    per_epoch: bool  # the data ends each epoch: fit makes a new iterator each epoch
    epoch_batches: int | None = None  # an epoch's batches, where not the split's
    own_epochs: bool = False  # epochs of the timing run's own, not the cell's (step_clock)

    @property
    def fit(self) -> dict[str, int | None]:
        return {"epochs": self.epochs, "steps_per_epoch": self.steps_per_epoch}

    @property
    def data(self) -> dict[str, object]:
        return {"epochs": self.per_epoch, "epoch_batches": self.epoch_batches}


def fit_length(run: Run, examples: int, predicted_s: float | None = None,
               synthetic: bool = False) -> FitLength:
    """The real steps' fit. A one-epoch timing run goes through epochs of its own of about
    train.epoch_seconds (timing.epoch_samples, from the probe's `predicted_s`), each a new
    iterator as a user's fit makes one, as many as its clock needs. Otherwise an epoch is
    train.steps_per_epoch, or the training images' whole batches, and the epochs are the
    cell's, or more where those would time fewer than train.min_timed_steps samples
    (timing.fit_epochs); each keeps its length, so validation still follows a whole epoch,
    and the clock stops fit once it has its minimum. Each epoch ends the data, so fit makes a
    new iterator each epoch; with train.epoch_seconds null in a one-epoch run, or on random
    data, one iterator serves every step."""
    train, block = run.train, run.block_steps
    steps = train.steps_per_epoch or max(1, examples // run.cell.batch_size)
    epochs = timing.fit_epochs(train, steps, block)
    samples = None if synthetic else timing.epoch_samples(train, predicted_s, block)
    if samples is not None:  # about as many samples as the cell's epochs held, or it times
        most = epochs * math.ceil(steps / block)
        if train.timed_steps:
            most = min(most, math.ceil(train.warmup_steps / block) + train.timed_steps)
        return FitLength(math.ceil(most / samples), None, True, samples * block, own_epochs=True)
    if synthetic or (train.epochs == 1 and not train.epoch_seconds):
        return FitLength(epochs, steps, False)
    return FitLength(epochs, None, True, train.steps_per_epoch)


def _real(session: Session, arms: list[Arm], prepared: dict, job: RepeatJob) -> None:
    """The timed steps on the cell's data, each arm with its clock, taking turns; the host's
    own speed before, between turns and after."""
    fits = {}
    for arm in arms:
        run = arm.run
        length = fit_length(run, prepared["splits"]["train"], job.predicted_s.get(arm.name),
                            is_synthetic(prepared))
        train_ds, val_ds = feed.cell_data(session, run, prepared, **length.data)
        arm.clock = step_clock(run, epochs=not length.own_epochs)
        if length.own_epochs and session.backend.facts.feeds == "dataset":
            arm.clock.ends = timing.EpochEnds(arm.clock.epoch_starts)
            train_ds = arm.clock.ends.track(train_ds)
        fits[arm.name] = dict(x=train_ds, validation_data=val_ds, verbose=run.train.verbose,
                              **length.fit)
    host = HostCheck(session, arms[0].run.device.host_check)
    host.sample()
    ticks = hardware.cpu_ticks()
    in_turns(arms, fits, {a.name: a.clock for a in arms}, job.progress, host.between_turns)
    # What neighbours on the same host took while the arms trained (the report says so).
    stolen = hardware.stolen_percent(ticks, hardware.cpu_ticks())
    host.sample()
    for arm in arms:
        arm.result.host_s = list(host.samples)
        arm.result.measured["host_ms"] = host.process_ms()
        if stolen is not None:
            arm.result.measured["cpu_stolen_pct"] = stolen


def _judge(session: Session, arm: Arm) -> None:
    """The outcome of an arm that ran, from its clock (or its error)."""
    if arm.error is not None:
        _failed(session, arm, arm.error)
        return
    clock, limit = arm.clock, arm.run.train.max_step_seconds
    if clock.nonfinite:
        step, value = clock.nonfinite
        arm.result.outcome = Outcome.NONFINITE
        arm.result.reason = f"loss became {value} at step {step}"
    elif clock.over_budget:
        arm.result.outcome = Outcome.OVER_BUDGET
        arm.result.reason = (
            f"the first two timed steps took {clock.over_budget:.1f} s or more > "
            f"train.max_step_seconds={limit}"
        )
    elif not clock.step_seconds:
        raise RuntimeError(
            f"{arm.name}: no step was timed: {clock.step} steps ran, "
            f"{arm.run.train.warmup_steps} of them warm-up; "
            "raise train.steps_per_epoch or train.epochs, or lower train.warmup_steps"
        )
    else:
        arm.result.outcome = Outcome.OK


def _record_timing(arm: Arm) -> None:
    clock, result = arm.clock, arm.result
    result.step_s, result.rounds = clock.step_seconds, clock.rounds
    result.timed_wall_s, result.stopped_by = clock.timed_wall_s, clock.stopped_by
    result.warmup_s, result.steps_per_sample = clock.warmup_seconds, clock.steps_per_sample
    result.epochs = clock.epochs
    result.epoch_starts = clock.epoch_starts


def _twins(session: Session, arms: list[Arm], prepared: dict, job: RepeatJob) -> None:
    """The same steps on random in-memory tensors (the synthetic twin), taking turns too: at
    most as many as the real run timed and train.synthetic_max_steps."""
    print("synthetic twins: the same steps on in-memory random data", flush=True)
    fits, clocks = {}, {}
    for arm in arms:
        run = arm.run
        timed = min(len(arm.result.step_s), run.train.synthetic_max_steps)
        # The model is warm, and its traced step is the real steps' own (the twin's data has
        # their element spec: engine/feed.py); one step lets the new input settle.
        warmup = 1
        clocks[arm.name] = timing.StepClock(
            warmup, timed, min(timed, run.train.min_timed_steps), None
        )
        data = feed.in_memory(session, run, prepared, run.cell.batch_size)
        fits[arm.name] = dict(x=data, epochs=1, steps_per_epoch=warmup + timed * run.block_steps,
                              verbose=0)
    in_turns(arms, fits, clocks, job.progress)
    for arm in arms:
        if arm.error is None:
            arm.result.synthetic_step_s = clocks[arm.name].step_seconds
            arm.result.synthetic_rounds = clocks[arm.name].rounds
        else:  # the twin is a measurement of compute alone: its failure costs the cell nothing
            print(f"{arm.name}: synthetic twin failed: {arm.error}", flush=True)
            arm.error = None


def _input(session: Session, arms: list[Arm], prepared: dict) -> list[Arm]:
    """The input pipeline's own cost per batch (the arms share it: one batch size, one
    dataset), and the arms whose twin is to run: with synthetic_twin true, those whose step
    the input could make INPUT_BOUND times their compute; the others say why not."""
    arms = [a for a in arms if a.run.train.synthetic_twin]
    if not arms:
        return []
    cost = feed.input_cost(session, arms[0].run, prepared)
    if cost is None:
        return arms
    wall, cpu = cost
    print(f"input pipeline alone: {1000 * wall:.1f} ms per batch, {1000 * cpu:.1f} ms of CPU",
          flush=True)
    twins = []
    for arm in arms:
        arm.result.measured["input_ms_per_batch"] = 1000 * wall
        arm.result.measured["input_cpu_ms_per_batch"] = 1000 * cpu
        step = statistics.median(arm.result.step_s)
        most = stats.input_bound_most(step, max(wall, cpu))
        if arm.run.train.synthetic_twin == "always" or most >= stats.INPUT_BOUND:
            twins.append(arm)
        else:
            arm.result.twin_note = (
                f"no synthetic twin: the input pipeline alone took {1000 * max(wall, cpu):.1f} ms "
                f"per batch, {100 * max(wall, cpu) / step:.1f}% of the {1000 * step:.1f} ms "
                f"step, so the step is at most {most:.3f}x its compute, below the input-bound "
                f"{stats.INPUT_BOUND}x (train.synthetic_twin=always runs it anyway)"
            )
    return twins


def _optimizer_scope(model) -> str | None:
    """The name scope the optimizer's update ops run in (inside a loss-scale wrapper: its
    inner optimizer's)."""
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    return getattr(optimizer, "name", None)


def profiled_steps(train, step_s: float) -> int:
    """train.profile_steps, or fewer where they would take longer than train.profile_seconds
    (one at least)."""
    if not train.profile_seconds or step_s <= 0:
        return train.profile_steps
    return max(1, min(train.profile_steps, math.ceil(train.profile_seconds / step_s)))


def _profile(session: Session, model, run: Run, prepared: dict, path: str, steps: int) -> Profiled:
    """`steps` more steps (or blocks) under the profiler, after the timed ones; the raw
    profile goes to `path`. One step (or block) first lets the new input iterator settle."""
    tf, keras = session.framework, session.keras
    block = run.block_steps
    train_ds, _ = feed.cell_data(session, run, prepared)
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0, device_tracer_level=1
    )

    class Profiler(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == block:  # the second call: the first block has run
                tf.profiler.experimental.start(path, options=options)

        def on_train_end(self, logs=None):
            tf.profiler.experimental.stop()

    timer = timing.make_step_timer(timing.StepClock(block, steps, steps, None))
    model.fit(train_ds, epochs=1, steps_per_epoch=(1 + steps) * block,
              callbacks=[Profiler(), timer], verbose=0, shuffle=False)
    scopes = {"model_scope": model.name, "optimizer_scope": _optimizer_scope(model)}
    return Profiled(dir=path, steps=steps * block, step_s=timer.clock.step_seconds, scopes=scopes,
                    layers=layer_types(model))


def layer_types(model) -> dict[str, str]:
    """Every layer of the model, nested models' too: its name and its class (Conv2D, ...)."""
    found, todo = {}, list(getattr(model, "layers", []))
    while todo:
        layer = todo.pop(0)
        found[layer.name] = type(layer).__name__
        todo += list(getattr(layer, "layers", []))
    return found


def _profiled(session: Session, arm: Arm, prepared: dict, path: str) -> None:
    """An ok arm's profile, or why it has none."""
    if not session.backend.facts.profiled:  # read from TensorFlow's profiler alone
        arm.result.profile_note = (
            f"op-level profiles are read for the tensorflow backend only, not {session.name}"
        )
        return
    folder = Path(path) / f"repeat{arm.result.repeat + 1}"  # a profile per repeat
    folder.mkdir(parents=True, exist_ok=True)
    sample = statistics.median(arm.result.step_s) * arm.run.block_steps
    steps = profiled_steps(arm.run.train, sample)
    try:
        arm.result.profile = _profile(session, arm.model, arm.run, prepared, str(folder), steps)
    except Exception as exc:  # noqa: BLE001 - a known outcome costs the arm its profile alone
        known = session.classify(exc)
        if known is None:
            raise
        arm.result.profile_note = f"not profiled: its profiled steps ended {known[0]}: {known[1]}"
        print(f"{arm.name}: {arm.result.profile_note}", flush=True)


def rotated(runs: tuple[Run, ...], repeat: int) -> list[Run]:
    """The group's runs in repeat `repeat`'s order: rotated by one each repeat."""
    k = repeat % len(runs)
    return [*runs[k:], *runs[:k]]


def _validated(session: Session, arm: Arm, prepared: dict) -> None:
    """The arm's validation batches (a failure there is the arm's outcome, as in training)."""
    try:
        time_validation(session, arm, prepared)
    except Exception as exc:  # noqa: BLE001 - classified, re-raised when unknown
        _failed(session, arm, exc)


# Where a timing process's wall time goes (RepeatResult.phases_s), in order: the interpreter
# and the framework starting (from the process's creation), the arms' models built, their
# warm-up, timed steps and what else their turns took (epoch starts, the host's check, the
# switch from arm to arm), the validation batches, the input pipeline's own cost, the
# synthetic twins, the profiles, and at the end the last epochs' iterators still being
# destroyed off the clock (engine/timing.py EpochEnds).
PHASES = ("start", "build", "warmup", "timed", "turns", "validation", "input_cost", "twins",
          "profile", "epoch_ends")


class Phases:
    """Seconds by phase: `with phases("build"): ...` adds what the block took."""

    def __init__(self, now=time.perf_counter):
        self.now, self.seconds = now, dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def __call__(self, name: str):
        began = self.now()
        try:
            yield
        finally:
            self.seconds[name] += self.now() - began


def process_age_s() -> float:
    """How long ago this process was created (Linux: /proc), the interpreter's start included."""
    stat = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    started = int(stat[19]) / os.sysconf("SC_CLK_TCK")
    return float(Path("/proc/uptime").read_text().split()[0]) - started


def _split_turns(phases: Phases, arms: list[Arm]) -> None:
    """The turns' seconds split into the arms' warm-up, their timed steps (or blocks) and the
    rest of the turns."""
    warmup = sum(sum(a.result.warmup_s) for a in arms)
    timed = sum(sum(a.result.step_s) * a.result.steps_per_sample for a in arms)
    phases.seconds["warmup"], phases.seconds["timed"] = warmup, timed
    phases.seconds["turns"] = max(0.0, phases.seconds["turns"] - warmup - timed)


def run_repeat(session: Session, job: RepeatJob, prepared: dict,
               phases: Phases | None = None) -> RepeatResult:
    """Train and time one repeat of the group; known failures become an arm's outcome, others
    are raised. Each ok arm then times its validation batches and, with a profile_dir (and
    train.profile_steps > 0), is profiled. The arms come back in the job's order."""
    process = uuid.uuid4().hex[:12]
    first = job.runs[0]
    facts = on_device(session, first.cell.device, first.device.tf32)
    arms = [
        Arm(run, ArmResult(repeat=job.repeat, policy=run.policy.name, fingerprint=dict(facts),
                           process=process, position=position))
        for position, run in enumerate(rotated(job.runs, job.repeat))
    ]
    phases = phases or Phases()
    with phases("build"):
        for arm in arms:
            _build(session, arm, prepared)
    live = [a for a in arms if a.model is not None]
    with phases("turns"):
        if live:
            _real(session, live, prepared, job)
    for arm in live:
        _judge(session, arm)
        if arm.clock is not None:
            _record_timing(arm)
    _split_turns(phases, live)
    with phases("validation"):
        for arm in live:
            if arm.result.outcome == Outcome.OK:
                _validated(session, arm, prepared)
    ok = [a for a in live if a.result.outcome == Outcome.OK]
    _after_steps(session, job, arms, ok, prepared, phases)
    with phases("epoch_ends"):  # the clock's epoch_starts, which the arm's result holds
        for arm in live:
            if arm.clock is not None and arm.clock.ends is not None:
                arm.clock.ends.join()
    for arm in arms:
        print(f"repeat {job.repeat + 1}, {arm.name}: {arm.result.outcome}", flush=True)
    order = [r.policy.name for r in job.runs]
    return RepeatResult(process=process,
                        arms=sorted((a.result for a in arms), key=lambda r: order.index(r.policy)),
                        phases_s=dict(phases.seconds))


def _after_steps(session: Session, job: RepeatJob, arms: list[Arm], ok: list[Arm],
                 prepared: dict, phases: Phases) -> None:
    """The ok arms' input cost and twins, then their profiles, each phase timed."""
    with phases("input_cost"):
        twins = _input(session, ok, prepared) if job.twins else []
    with phases("twins"):
        if twins:
            _twins(session, twins, prepared, job)
    dirs = dict(zip([a.name for a in arms], job.profile_dirs, strict=False))
    with phases("profile"):
        for arm in ok:
            if dirs.get(arm.name) and arm.run.train.profile_steps:
                _profiled(session, arm, prepared, dirs[arm.name])


def run(job: RepeatJob, start) -> RepeatResult:
    """Do a repeat (the engine's entry point: `start` starts its backend), its phases timed
    from the process's creation."""
    phases = Phases()
    session = start(job.runs[0].backend.name)
    phases.seconds["start"] = process_age_s()
    return run_repeat(session, job, read_json(job.prepared), phases)
