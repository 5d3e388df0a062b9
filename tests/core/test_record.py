"""The run record's fields are described once; summary.csv and MLflow follow that description."""

from mptbench.core import record
from mptbench.report.summary import summarise


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
    assert all(record.BY_NAME[m].numeric for m in record.METRICS)
