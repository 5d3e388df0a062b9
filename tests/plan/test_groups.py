"""Which cells a train, probe or fits job stands for, and the Runs it is given."""

import pytest
from smoke_plan import GROUP, smoke_plan

from mptbench.plan import Cell, ConfigError
from mptbench.plan.groups import comparison, fit_run, group_runs, probe_run, train_runs


@pytest.fixture(scope="module")
def smoke():
    return smoke_plan()


def test_a_train_job_times_one_cell_per_policy_at_its_batch_size(smoke):
    cfg, cells = smoke
    group = comparison(cfg, cells, {**GROUP, "batch_size": "8"})
    assert [(c.policy, c.batch_size) for c in group] == [
        ("float32", 8), ("mixed_bfloat16", 8), ("mixed_float16", 8)]
    runs = group_runs(cfg, cells, {**GROUP, "batch_size": "8"})
    assert [run["cell"]["policy"] for run in runs] == ["float32", "mixed_bfloat16",
                                                       "mixed_float16"]
    assert {run["cell"]["batch_size"] for run in runs} == {8}


def test_a_train_job_times_a_series_a_group_per_batch_size(smoke):
    cfg, cells = smoke
    series = train_runs(cfg, cells, GROUP)
    assert [[(r["cell"]["policy"], r["cell"]["batch_size"]) for r in g] for g in series] == [
        [("float32", b), ("mixed_bfloat16", b), ("mixed_float16", b)] for b in (4, 8)
    ]


def test_a_batch_size_outside_the_grid_is_no_comparison_of_the_experiment(smoke):
    cfg, cells = smoke
    with pytest.raises(ConfigError, match="box/seed_convnet/tensorflow/pypi/cpu/bs16 is not a"):
        comparison(cfg, cells, {**GROUP, "batch_size": "16"})


def test_a_probe_runs_its_cell_at_the_smaller_probe_batch_size(smoke):
    cfg, _ = smoke
    run = probe_run(cfg, {**GROUP, "policy": "mixed_float16"})
    assert cfg["train"]["probe_batch_sizes"] == [2, 4]
    assert run["cell"]["batch_size"] == 2 and run["cell"]["policy"] == "mixed_float16"


def test_the_fits_search_starts_at_the_grids_smallest_batch(smoke):
    cfg, cells = smoke
    run = fit_run(cfg, cells, {**GROUP, "policy": "float32"})
    first = Cell("box", "seed_convnet", "tensorflow", "pypi", "cpu", "float32", 4)
    assert run["cell"] == vars(first)
    with pytest.raises(ConfigError, match="fits/elsewhere/.*: not a cell of smoke"):
        fit_run(cfg, cells, {**GROUP, "machine": "elsewhere", "policy": "float32"})
