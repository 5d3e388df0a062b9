"""The run record's fields are described once; summary.csv, MLflow and what the train job writes
into a record follow that description."""

import json
from dataclasses import replace

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core import record
from mptbench.core.contract import ArmResult, ModelInfo, ProbePoint, ProbeResult, RepeatResult
from mptbench.core.outcomes import Outcome
from mptbench.jobs.combine import combine, model_figures
from mptbench.jobs.series import train_group
from mptbench.report.summary import summarise

ALLOWED = set(record.COLUMNS) | set(record.STRUCTURAL)
FLOPS = {"conv": 3e8, "matmul": 1e8, "other": 1e6}
MODEL = ModelInfo(
    "seed_convnet",
    "python",
    [32, 32, 3],
    10,
    1234,
    FLOPS,
    FLOPS,
    "hand",
    builder="mymodels:small_cnn",
    builder_file="mymodels.py",
    builder_sha256="ab" * 32,
)
INPUT = {"input_ms_per_batch": 40.0, "input_cpu_ms_per_batch": 45.0}
# What the engine measures of a repeat beyond its steps: every per_repeat field.
MEASURED = {name: 1.0 for name in record.PER_REPEAT} | INPUT


def test_summary_columns_are_the_described_fields_in_order():
    summary = summarise([{"device": "cpu", "policy": "float32", "batch_size": 8, "outcome": "ok"}])
    assert list(summary.columns) == record.COLUMNS


def test_fields_read_nested_values_by_path():
    row = {"fingerprint": {"onednn": "on"}, "config": {"device": {"block_steps": 10}}}
    assert record.BY_NAME["onednn"].read(row) == "on"
    assert record.BY_NAME["block_steps"].read(row) == 10
    assert record.BY_NAME["wheel"].read(row) is None


def test_metrics_and_runs_table_are_subsets_of_the_columns():
    assert set(record.METRICS) <= set(record.COLUMNS)
    assert set(record.RUNS_TABLE) <= set(record.COLUMNS)
    assert "ms_per_step" in record.METRICS and "mlflow_run_id" in record.RUNS_TABLE
    assert all(record.BY_NAME[m].numeric for m in record.METRICS + record.REPORT_METRICS)
    # What the report derives it gives back to the cell's run; the train job logs the rest.
    assert "speedup_vs_baseline" in record.REPORT_METRICS and "mfu" in record.REPORT_METRICS
    assert "speedup_verdict" in record.REPORT_TAGS and "outcome" in record.TAGS
    assert not set(record.METRICS) & set(record.REPORT_METRICS)


def _arm(repeat, policy="float32", twin=True, outcome=Outcome.OK, steps=None, validated=True):
    """A repeat's result with every optional part: its twin (or why none ran), the input's own
    cost, a profile note in place of a profile, the trainer's CPU use, its validation batches
    (or why none were timed)."""
    steps = steps or [0.10 + 0.01 * repeat, 0.11, 0.10, 0.12]
    return ArmResult(
        repeat=repeat,
        policy=policy,
        fingerprint={"host": "h", "tensorflow": "2.21.0"},
        outcome=outcome,
        reason=None if outcome == Outcome.OK else "out of memory",
        step_s=steps,
        rounds=list(range(len(steps))),
        timed_wall_s=sum(steps),
        stopped_by="steps",
        warmup_s=[1.0],
        epochs=[{"epoch": 1, "loss": 2.0, "val_accuracy": 0.1}],
        synthetic_step_s=[0.09, 0.09] if twin else None,
        synthetic_rounds=[0, 1] if twin else None,
        measured=dict(MEASURED),
        twin_note=None if twin else "no synthetic twin: the input is 4% of the step",
        profile_note="op-level profiles are read for the tensorflow backend only, not jax",
        process=f"p{repeat}",
        cpu_percent=150.0,
        host_s=[0.0011, 0.0012],
        validation_first_s=0.5 if validated else None,
        validation_s=[0.04, 0.05] if validated else [],
        validation_note=None if validated else "no validation split",
    )


def _combined(repeats):
    """The keys combine() writes into a record that has its model's figures and a prediction."""
    given = {"predicted_step_s": 0.2, "train_examples": 800, "validation_examples": 160,
             "config": {"train": {"epochs": 1}}} | model_figures(MODEL, batch_size=8)
    out = dict(given)
    combine(out, repeats, batch_size=8, fastest_host_ms=0.5)
    return out, set(out) - set(given)


def test_every_key_combine_writes_is_a_field_or_a_named_structural_part():
    cells = [
        [_arm(i) for i in range(3)],  # synthetic twins
        [_arm(i, twin=False) for i in range(3)],  # no twin: the input's bound instead
        [_arm(0), _arm(1, outcome=Outcome.OOM, steps=[0.5])],  # a repeat that failed
        [_arm(0, outcome=Outcome.OOM, steps=[])],  # nothing timed
        [_arm(i, validated=False) for i in range(2)],  # no whole run, and why
    ]
    written = set()
    for repeats in cells:
        out, new = _combined(repeats)
        assert set(out) <= ALLOWED, set(out) - ALLOWED
        written |= new
    # What combine writes of the fields is what record.py flags measured (and nothing else).
    measured = {f.name for f in record.FIELDS if f.measured and not f.path}
    assert written - set(record.STRUCTURAL) == measured


def test_a_figure_the_engine_measures_without_a_field_fails_the_cell():
    arm = replace(_arm(0), measured=MEASURED | {"unlisted_ms": 3.0})
    with pytest.raises(ValueError, match="the engine measured unlisted_ms: no per_repeat field"):
        combine({}, [arm], batch_size=8)


class ScriptedTrainer:
    """The engine's repeats from a script (no TensorFlow): every arm ok, the second policy
    without a twin; `pending` as the train job keeps records until MLflow has them."""

    def __init__(self, runs, folder):
        self.runs = runs
        self.pending = [folder / f".{r.policy.name}.pending" for r in runs]

    def repeat(self, prepared, repeat, runs):
        arms = [_arm(repeat, r.policy.name, twin=i == 0) for i, r in enumerate(runs)]
        return RepeatResult(f"p{repeat}", arms)

    def forget(self):
        pass


def test_every_key_the_train_job_writes_is_a_field_or_a_named_structural_part(tmp_path):
    train = {"repeats": 2, "max_repeats": 2, "precision": None, "max_step_seconds": 60}
    runs = [smoke_cell_run(policy=p, **train) for p in ("float32", "mixed_float16")]
    prepared = tmp_path / "prepared.json"
    prepared.write_text(json.dumps({"dataset": "imagenette-test", "image_size": 32}))
    points = [ProbePoint(4, 0.1, [0.05], 0.05), ProbePoint(16, 0.2, [0.1], 0.1)]
    probes = {
        r.policy.name: ProbeResult("tensorflow", "pypi", "cpu", r.policy.name, 32, points)
        for r in runs
    }
    tries = [{"batch_size": 8, "outcome": "ok", "peak_mb": 300.0, "peak_source": "VmHWM"}]
    fits = {
        r.policy.name: {"tries": tries, "largest_fit": 64, "memory_limit_mb": None} for r in runs
    }
    records = train_group(
        ScriptedTrainer(runs, tmp_path), str(prepared), None, probes, MODEL, fits=fits
    )
    for cell in records:
        assert set(cell) <= ALLOWED, set(cell) - ALLOWED
        assert cell["outcome"] == Outcome.OK and len(cell["repeats"]) == 2
    assert "input_bound_ratio" in records[0] and "input_bound_ratio_most" in records[1]
