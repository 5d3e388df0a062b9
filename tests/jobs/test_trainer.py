"""A train job's trainer keeps each finished process until its group's records are written:
a job stopped halfway runs only what it had not finished."""

from workflow_helpers import smoke_cell_run

from mptbench.core.contract import ArmResult, RepeatResult
from mptbench.jobs.launcher import Engine, Finished
from mptbench.jobs.trainer import Death, Trainer


def _trainer(tmp_path, launched, keep=True):
    trainer = Trainer("python", [smoke_cell_run()], [str(tmp_path / "bs8.json")], keep=keep)

    def launch(prepared, repeat, runs):
        launched.append(repeat)
        if repeat == 2:
            return Death("oom", "out of memory", "float32")
        return RepeatResult(f"p{repeat}", [ArmResult(repeat, "float32", {}, outcome="ok",
                                                     step_s=[0.1 * (repeat + 1)])])

    trainer._launch = launch
    return trainer


def test_a_rerun_takes_the_finished_processes_kept_and_runs_the_rest(tmp_path):
    launched: list[int] = []
    first = _trainer(tmp_path, launched)
    runs = first.runs
    assert first.repeat("p.json", 0, runs).arms[0].step_s == [0.1]
    assert isinstance(first.repeat("p.json", 2, runs), Death)
    again = _trainer(tmp_path, launched)  # the job run again after a kill
    kept = again.repeat("p.json", 0, runs)
    assert kept.process == "p0" and kept.arms[0].step_s == [0.1]
    assert again.repeat("p.json", 2, runs).outcome == "oom"  # a death is kept too
    assert again.repeat("p.json", 1, runs).arms[0].step_s == [0.2]
    assert launched == [0, 2, 1]


def test_other_runs_or_a_finished_group_leave_nothing_to_take(tmp_path):
    launched: list[int] = []
    _trainer(tmp_path, launched).repeat("p.json", 0, [smoke_cell_run()])
    other = _trainer(tmp_path, launched)
    other.repeat("p.json", 0, [smoke_cell_run(timed_steps=7)])  # another config: run again
    done = _trainer(tmp_path, launched)
    done.forget()
    done.repeat("p.json", 0, [smoke_cell_run()])
    assert launched == [0, 0, 0] and len(list(tmp_path.glob(".bs8.json.repeat*"))) == 1


def test_without_keep_nothing_is_kept(tmp_path):
    launched: list[int] = []
    for _ in range(2):
        _trainer(tmp_path, launched, keep=False).repeat("p.json", 0, [smoke_cell_run()])
    assert launched == [0, 0] and not list(tmp_path.glob(".*"))


def test_a_probe_whose_trainer_aborted_on_a_refused_kernel_is_that_outcome(tmp_path, monkeypatch):
    """oneDNN refusing a bfloat16 matmul aborts the process (core/outcomes.refusal): the probe
    comes back unsupported with the reason, where the job used to fail."""
    trainer = Trainer("python", [smoke_cell_run("mixed_bfloat16")], [str(tmp_path / "p.json")])
    said = "oneDNN: could not create a primitive descriptor for a matmul primitive"
    monkeypatch.setattr(Engine, "launch", lambda *args: Finished(death=("unsupported", said)))
    prepared = tmp_path / "prepared.json"
    prepared.write_text('{"image_size": 16}')
    probe = trainer.probe(str(prepared))
    assert (probe.outcome, probe.reason, probe.points) == ("unsupported", said, [])
    assert (probe.policy, probe.image_size) == ("mixed_bfloat16", 16)


def test_a_group_timing_its_baseline_alone_is_profiled_only_under_the_full_plan(
        tmp_path, monkeypatch):
    """The why explains a policy against the baseline in the processes they shared: under
    the fast plan a group whose other policies all left (over budget, failed) pays for no
    profile; a compared group, or the full plan, profiles the first profile_repeats."""
    jobs = []
    monkeypatch.setattr(Engine, "launch", lambda self, job, *args: jobs.append(job) or Finished(
        result=RepeatResult("p", [ArmResult(job.repeat, r.policy.name, {}, outcome="ok")
                                  for r in job.runs])))

    notes = []

    def profiled(plan, policies, repeat=0):
        runs = [smoke_cell_run(p, plan=plan, profile_repeats=2) for p in policies]
        trainer = Trainer("python", runs, [str(tmp_path / f"{p}.json") for p in policies],
                          [str(tmp_path / f"{p}.profile") for p in policies], keep=False)
        notes[:] = [a.profile_note for a in trainer.repeat("p.json", repeat, runs).arms]
        return [d is not None for d in jobs[-1].profile_dirs]

    assert profiled("fast", ["float32"]) == [False]
    assert notes == ["not profiled: no other policy timed beside it to explain "
                     "(train.plan=full profiles it)"]  # the report says why it has none
    assert profiled("full", ["float32"]) == [True]
    assert profiled("fast", ["float32", "mixed_float16"]) == [True, True]
    assert profiled("fast", ["float32", "mixed_float16"], repeat=2) == [False, False]
