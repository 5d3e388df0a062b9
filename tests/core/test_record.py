"""The run record's fields are described once; summary.csv, MLflow and what the train job writes
into a record follow that description."""

import copy
import csv
import json
import math
import re
from dataclasses import replace

import pandas as pd
import pytest
from records import record, unmeasured_record
from workflow_helpers import smoke_cell_run

from mptbench.core import record as fields
from mptbench.core.contract import ArmResult, ModelInfo, ProbePoint, ProbeResult, RepeatResult
from mptbench.core.outcomes import Outcome
from mptbench.jobs import series
from mptbench.jobs.combine import combine, model_figures
from mptbench.jobs.series import train_series
from mptbench.report import sections
from mptbench.report.aggregate import cell_results
from mptbench.report.summary import summarise
from mptbench.report.tables import text

ALLOWED = set(fields.COLUMNS) | set(fields.STRUCTURAL)
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
MEASURED = {name: 1.0 for name in fields.PER_REPEAT} | INPUT


def test_summary_columns_are_the_described_fields_in_order():
    summary = summarise([record()])
    assert list(summary.columns) == fields.COLUMNS


def test_fields_read_nested_values_by_path():
    row = {"fingerprint": {"onednn": "on"}, "config": {"device": {"block_steps": 10}}}
    assert fields.BY_NAME["onednn"].read(row) == "on"
    assert fields.BY_NAME["block_steps"].read(row) == 10
    assert fields.BY_NAME["wheel"].read(row) is None


class LoggedRun:
    """A cell's MLflow run that keeps what the train job logs on it."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def finish(self, metrics, tags, cell):
        self.metrics, self.tags = metrics, tags


def test_the_train_job_logs_every_metric_and_tag_field_the_record_holds_read_by_its_path(tmp_path):
    """Every field flagged metric, at its value (by path: breakdown_closure is under breakdown),
    and every one flagged tag; the profile's classes beside them."""
    numbers = {name: float(i + 1) for i, name in enumerate(fields.METRICS)}
    cell = record(**numbers, breakdown={"classes_ms": {"conv_forward": 7.0}, "dir": str(tmp_path)})
    run = LoggedRun()
    series._log(run, cell)
    assert run.metrics == numbers | {"breakdown_conv_forward_ms": 7.0}
    # A tag held under config or the fingerprint is logged by name, read by its path too.
    assert run.tags == {name: fields.BY_NAME[name].read(cell) or "" for name in fields.TAGS}
    assert run.tags["kernel_isa"] == cell["fingerprint"]["kernel_isa"] == "avx512_core"
    assert "ms_per_step" in fields.METRICS and "outcome" in fields.TAGS


def test_the_table_of_runs_shows_every_runs_table_field_with_each_runs_value():
    cell = record(ms_per_step=123.4, predicted_step_s=0.1, mlflow_run_id="0123456789abcdef")
    [row] = summarise([cell]).to_dict("records")
    table = sections.runs(pd.DataFrame([row]), "http://mlflow.example")
    names = [c["text"] for c in table["head"]]
    assert names == [*fields.RUNS_TABLE[:-1], "MLflow run"]
    assert fields.RUNS_TABLE[-1] == "mlflow_run_id"
    [shown] = table["rows"]
    expected = {name: text(row[name]) for name in fields.RUNS_TABLE}
    expected |= {"ms_per_step": "123", "predicted_step_s": "0.10", "mlflow_run_id": "01234567"}
    assert {name: c["text"] for name, c in zip(fields.RUNS_TABLE, shown, strict=True)} == expected
    assert shown[-1]["href"].startswith("http://mlflow.example/#/experiments/1/runs/0123456789")


def test_summary_csv_holds_every_numeric_field_as_a_number_and_every_count_as_an_integer(tmp_path):
    """Read back from the CSV, whether or not every row has the figure (a cell that ran out of
    memory has none of what its repeats measure)."""
    cells = [record(), record(policy="mixed_bfloat16"), record(batch_size=64, outcome="oom")]
    summarise(cells).to_csv(tmp_path / "summary.csv", index=False)
    with open(tmp_path / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    for field in fields.FIELDS:
        values = [r[field.name] for r in rows if r[field.name] != ""]
        if field.type is int:
            assert all(re.fullmatch(r"-?\d+", v) for v in values), (field.name, values)
        elif field.numeric:
            assert all(math.isfinite(float(v)) for v in values), (field.name, values)
    timed = {r["outcome"]: r["timed_steps"] for r in rows}
    assert timed == {"ok": "12", "oom": ""}


def test_the_report_gives_back_to_a_cells_run_what_it_derived_and_nothing_the_train_job_logged():
    cells = [record(), record(policy="mixed_bfloat16", ms_per_step=50.0)]
    summary = summarise(cells)
    metrics, tags = cell_results(summary)["run-cpu-mixed_bfloat16-8"]
    row = summary.set_index("policy").loc["mixed_bfloat16"]
    assert metrics["speedup_vs_baseline"] == pytest.approx(2.0) and tags["speedup_verdict"]
    derived = [f.name for f in fields.FIELDS if f.derived]
    assert metrics == {m: row[m] for m in derived if fields.BY_NAME[m].metric and pd.notna(row[m])}
    assert tags == {t: row[t] for t in derived if fields.BY_NAME[t].tag and pd.notna(row[t])}
    assert "speedup_vs_baseline" in fields.REPORT_METRICS and "mfu" in fields.REPORT_METRICS
    assert "speedup_verdict" in fields.REPORT_TAGS


def _arm(repeat, policy="float32", twin=True, outcome=Outcome.OK, steps=None, validated=True,
         epoch_starts=True):
    """A repeat's result with every optional part: its twin (or why none ran), the input's own
    cost, a profile note in place of a profile, the trainer's CPU use, its validation batches
    (or why none were timed), its epochs' starts, one of which waited (or none timed)."""
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
        epoch_starts=[{"lived_s": 1.5, "wait_s": 0.6}, {"lived_s": 1.5, "wait_s": 0.0}]
        if epoch_starts else [],
    )


def _combined(repeats):
    """The keys combine() writes into a record that has its model's figures and a prediction."""
    given = unmeasured_record(predicted_step_s=0.2, train_examples=800, validation_examples=160,
                              config={"train": {"epochs": 1}}, **model_figures(MODEL, batch_size=8))
    out = copy.deepcopy(given)
    combine(out, repeats, batch_size=8, fastest_host_ms=0.5)
    return out, set(out) - set(given)


def test_every_key_combine_writes_is_a_field_or_a_named_structural_part():
    cells = [
        [_arm(i) for i in range(3)],  # synthetic twins
        [_arm(i, twin=False) for i in range(3)],  # no twin: the input's bound instead
        [_arm(0), _arm(1, outcome=Outcome.OOM, steps=[0.5])],  # a repeat that failed
        [_arm(0, outcome=Outcome.OOM, steps=[])],  # nothing timed
        [_arm(i, validated=False) for i in range(2)],  # no whole run, and why
        [_arm(i, epoch_starts=False) for i in range(2)],  # no epoch start timed, and why
    ]
    written = set()
    for repeats in cells:
        out, new = _combined(repeats)
        assert set(out) <= ALLOWED, set(out) - ALLOWED
        written |= new
    # What combine writes of the fields is what record.py flags measured (and nothing else).
    measured = {f.name for f in fields.FIELDS if f.measured and not f.path}
    assert written - set(fields.STRUCTURAL) == measured


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
        self.predicted_s = {}

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
        r.policy.name: {"tries": tries, "largest_fit": 64, "fits_search_mb": None} for r in runs
    }
    [records] = train_series(
        [ScriptedTrainer(runs, tmp_path)], str(prepared), None, probes, MODEL, fits=fits
    )
    for cell in records:
        assert set(cell) <= ALLOWED, set(cell) - ALLOWED
        assert cell["outcome"] == Outcome.OK and len(cell["repeats"]) == 2
    assert "input_bound_ratio" in records[0] and "input_bound_ratio_most" in records[1]
