"""The tests' run records and summary rows (tests/records.py): every field of core/record.py in
them, a name that is no field refused, and a row what the report makes of the record."""

import pandas as pd
import pytest
from records import record, summary_row, unmeasured_record

from mptbench.core.record import COLUMNS, FIELDS
from mptbench.report.summary import summarise

HARDWARE = ["device_name", "compute_capability", "fast_float16", "fast_bfloat16", "cpu_flags"]


def _has(made: dict, path: str) -> bool:
    *parts, last = path.split(".")
    for key in parts:
        made = made.get(key)
        if not isinstance(made, dict):
            return False
    return last in made


def test_a_record_holds_every_field_but_the_derived_at_its_path_and_a_row_every_column():
    made = record()
    assert [f.name for f in FIELDS if not f.derived and not _has(made, f.path or f.name)] == []
    assert not [f.name for f in FIELDS if f.derived and f.name in made and f.name != "repeats"]
    assert list(summary_row()) == COLUMNS
    before = unmeasured_record()
    assert [f.name for f in FIELDS if f.measured and _has(before, f.path or f.name)] == []
    assert "repeats" not in before and before["batch_size"] == made["batch_size"]


@pytest.mark.parametrize("build", [record, unmeasured_record, summary_row])
def test_a_name_that_is_no_field_is_refused(build):
    with pytest.raises(TypeError, match="no field ms_per_stepp in core/record.py"):
        build(ms_per_stepp=100.0)


def test_a_record_takes_no_derived_field_and_an_unmeasured_one_no_measured_field():
    with pytest.raises(TypeError, match="no field speedup_vs_baseline"):
        record(speedup_vs_baseline=2.0)
    with pytest.raises(TypeError, match="no field ms_per_step"):
        unmeasured_record(ms_per_step=100.0)


def test_values_follow_the_ones_given_as_the_records_do():
    bf16 = record(policy="mixed_bfloat16", batch_size=16, ms_per_step=40.0,
                  config={"train": {"repeats": 3}})
    assert (bf16["compute_dtype"], bf16["baseline"]) == ("bfloat16", False)
    assert bf16["images_per_sec"] == pytest.approx(400.0)
    assert bf16["ms_per_step_ci_low"] < 40.0 < bf16["ms_per_step_ci_high"]
    assert bf16["config"]["train"] == {"epochs": 1, "repeats": 3}  # merged, not replaced
    assert bf16["mlflow_run_id"] == "run-cpu-mixed_bfloat16-16"
    oom = record(outcome="oom")
    assert oom["ms_per_step"] is None and oom["repeats"] == [] and oom["reason"]
    assert summary_row(policy="mixed_bfloat16")["speedup_verdict"] == "no measurable difference"
    assert summary_row()["speedup_ci_low"] is None  # the baseline's own: 1 and no interval


@pytest.mark.parametrize("given", [{}, {"policy": "mixed_bfloat16", "device": "gpu0"},
                                   {"batch_size": 64, "outcome": "oom"}],
                         ids=["baseline", "gpu", "oom"])
def test_a_row_is_what_summarise_makes_of_the_record_for_what_the_record_holds(given):
    """Every column the record holds, its hardware from the fingerprint and its repeats."""
    [made] = summarise([record(**given)]).to_dict("records")
    row = summary_row(**given)
    held = [f.name for f in FIELDS if not f.derived] + HARDWARE + ["repeats"]
    differ = {name: (row[name], made[name]) for name in held
              if not (pd.isna(row[name]) and pd.isna(made[name]))
              and row[name] != pytest.approx(made[name])}
    assert differ == {}
