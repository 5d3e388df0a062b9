"""The workflow as a user runs it: snakemake on the smoke experiment, lint, and dry runs."""

import json
import sqlite3

import mlflow
import pandas as pd
import pytest
from workflow_helpers import active_runs, copy_workflow, job_counts, snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="module")
def smoke(checkout):
    done = snakemake(checkout, "--cores", "2", "--config", "experiment=smoke")
    assert done.returncode == 0, done.stderr[-3000:]
    return checkout


def test_smoke_run_reports_every_cell(smoke):
    summary = pd.read_csv(smoke / "results/smoke/report/summary.csv")
    assert len(summary) == 4
    assert set(summary["outcome"]) == {"ok"}
    assert (summary["ms_per_step"] > 0).all()
    assert set(summary["policy"]) == {"float32", "mixed_float16"}
    assert set(summary["batch_size"]) == {4, 8}
    # Every figure with its interval, each cell timed in two processes.
    assert (summary["ms_per_step_ci_low"] <= summary["ms_per_step"]).all()
    assert (summary["ms_per_step"] <= summary["ms_per_step_ci_high"]).all()
    assert set(summary["repeats"]) == {2}
    mixed = summary[summary["policy"] == "mixed_float16"]
    assert mixed["speedup_ci_low"].notna().all() and mixed["speedup_verdict"].notna().all()
    assert summary["predicted_step_s"].notna().all() and summary["prediction_error"].notna().all()
    html = (smoke / "results/smoke/report/index.html").read_text()
    assert "<table" in html and ".png" in html
    assert "Tesla V100" in html  # the published numbers beside ours


def test_smoke_cells_are_profiled_and_their_op_classes_add_up(smoke):
    report = smoke / "results/smoke/report"
    summary = pd.read_csv(report / "summary.csv")
    breakdown = pd.read_csv(report / "breakdown.csv")
    assert len(breakdown) == 12 * len(summary)  # every ok cell, every class
    cells = breakdown.groupby(["policy", "batch_size"])
    for (policy, batch_size), rows in cells:
        classes = rows.set_index("op_class")["ms_per_step"]
        measured = summary.set_index(["policy", "batch_size"]).loc[(policy, batch_size)]
        # The classes, host overhead/idle included, add up to the measured median step.
        assert classes.sum() == pytest.approx(measured["ms_per_step"], rel=0.10)
        assert measured["profiled_ms_per_step"] > 0  # what the profiled steps took
        assert classes["conv_forward"] > 0 and classes["conv_backward_filter"] > 0
        if policy == "float32":
            assert classes["cast"] == 0 and classes["loss_scaling"] == 0
        else:
            assert classes["cast"] > 0 and classes["loss_scaling"] > 0
    profiles = list((smoke / "results/smoke/profiles").rglob("*.xplane.pb"))
    assert len(profiles) == len(summary)  # the raw profiles, for TensorBoard/XProf
    html = (report / "index.html").read_text()
    where = html.split("<h2>Where the time went</h2>", 1)[1].split("<h2>", 1)[0]
    assert "mixed_float16 vs float32 at batch 8 on pypi · cpu" in where
    assert "; net " in where and "(speedup_vs_float32)" in where
    assert '<img src="breakdown.png"' in where and "Not profiled" not in where


def test_smoke_run_logs_one_mlflow_run_per_cell(smoke):
    db = smoke / "results/mlflow.db"
    runs = active_runs(db, "smoke")
    assert len(runs) == 4 and {status for _, status in runs} == {"FINISHED"}
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    for run_id, _ in runs:
        assert "profile" in {a.path for a in client.list_artifacts(run_id)}
        assert "breakdown_conv_forward_ms" in client.get_run(run_id).data.metrics
    with sqlite3.connect(db) as con:
        for run_id, _ in runs:
            params = dict(
                con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,))
            )
            assert params["dataset.name"] == "imagenette2-320-smoke"
            epochs = con.execute(
                "SELECT step FROM metrics WHERE run_uuid = ? AND key = 'loss' ORDER BY step",
                (run_id,),
            ).fetchall()
            assert [s for (s,) in epochs] == [1, 2]
    records = sorted((smoke / "results/smoke/runs").rglob("*.json"))
    assert {json.loads(p.read_text())["mlflow_run_id"] for p in records} == {r for r, _ in runs}


def test_second_run_does_nothing(smoke):
    again = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr


def test_data_target_stops_after_prepare(smoke):
    # Targets go before --config: everything after it is read as config.
    dry = snakemake(
        smoke, "data", "-n", "--config", "experiment=smoke", "overrides=[dataset.image_size=24]"
    )
    assert dry.returncode == 0, dry.stderr
    # The archive is cached: only the new size's cache is built, and nothing is trained.
    assert job_counts(dry.stdout + dry.stderr) == {"prepare": 1, "data": 1, "total": 2}


def test_lint_is_clean(checkout):
    lint = snakemake(checkout, "--lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "Congratulations" in lint.stdout + lint.stderr


def test_default_dry_run_lists_the_full_grid(checkout):
    dry = snakemake(checkout, "-n")
    assert dry.returncode == 0, dry.stderr
    out = dry.stdout + dry.stderr
    # CPU only here: 3 policies x 5 batch sizes.
    assert job_counts(out)["train"] == 15
    assert "imagenette2-320.tgz" in out


def test_bad_config_fails_before_any_job_with_one_line(checkout):
    bad = snakemake(checkout, "-n", "--config", "overrides=[sweep.batch_sizes=[0]]")
    assert bad.returncode != 0
    assert (
        "mptbench config: sweep.batch_sizes[0]: 0 is not an integer >= 1" in bad.stdout + bad.stderr
    )
    assert not (checkout / "results" / "benchmark").exists()


def test_variants_run_side_by_side_with_their_own_settings(smoke):
    overrides = 'overrides=["name=smoke_variants","variant=[pypi,pypi_onednn,pypi_xla]",'
    overrides += '"policy=[float32]","sweep.batch_sizes=[8]"]'
    done = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke", overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    # pypi's calibration (same settings as smoke's) is reused; only the new variants calibrate.
    assert job_counts(done.stdout + done.stderr)["calibrate"] == 2
    summary = pd.read_csv(smoke / "results/smoke_variants/report/summary.csv")
    assert sorted(summary["variant"]) == ["pypi", "pypi_onednn", "pypi_xla"]
    assert set(summary["outcome"]) == {"ok"} and (summary["ms_per_step"] > 0).all()
    by_variant = summary.set_index("variant")
    assert bool(by_variant.loc["pypi_xla", "xla"]) and not bool(by_variant.loc["pypi", "xla"])
    assert by_variant["onednn"].notna().all()
    record = json.loads(
        (smoke / "results/smoke_variants/runs/pypi_onednn/cpu/float32/bs8.json").read_text()
    )
    assert record["config"]["variant"]["env"] == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert record["config"]["variant"]["installed"]["tensorflow"] == "2.21.0"
    assert "TensorFlow variants" in (smoke / "results/smoke_variants/report/index.html").read_text()


def test_a_policy_added_by_override_alone_gets_its_own_dtype(smoke):
    """Adding a policy is adding its facts: no table in the code needs to know its name."""
    overrides = (
        'overrides=["name=smoke_policy","policy=[float32]","sweep.batch_sizes=[4]",'
        '"train.profile_steps=0",'
        '"+policy.bf16_copy={compute_dtype:bfloat16,variable_dtype:float32,loss_scaling:none}"]'
    )
    done = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke", overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = pd.read_csv(smoke / "results/smoke_policy/report/summary.csv").set_index("policy")
    assert summary.loc["bf16_copy", "compute_dtype"] == "bfloat16"
    assert summary.loc["bf16_copy", "outcome"] == "ok"
    (calibration_file,) = (smoke / "results/calibration/pypi/cpu").glob("*.json")
    calibration = json.loads(calibration_file.read_text())
    row = summary.loc["bf16_copy"]
    # Its convolution FLOPs at the bfloat16 conv peak, its dense FLOPs at the matmul peak.
    seconds = row["conv_flops_per_step"] / (calibration["conv"]["bfloat16"]["tflops"] * 1e12)
    seconds += row["matmul_flops_per_step"] / (calibration["matmul"]["bfloat16"]["tflops"] * 1e12)
    bf16_peak = row["flops_per_step"] / seconds / 1e12
    assert row["peak_tflops"] == pytest.approx(bf16_peak)
    assert summary.loc["bf16_copy", "mfu"] == pytest.approx(
        summary.loc["bf16_copy", "achieved_tflops"] / bf16_peak
    )
    html = (smoke / "results/smoke_policy/report/index.html").read_text()
    diagnosis = html.split("<b>Diagnosis.</b>", 1)[1].split("</p>", 1)[0]
    assert "bf16_copy against float32 (speedup_vs_float32)" in diagnosis
    assert "bf16_copy reached" in diagnosis and "bfloat16 peak" in diagnosis
    # train.profile_steps=0: no breakdown, and the report says so rather than guessing.
    report = smoke / "results/smoke_policy/report"
    assert pd.read_csv(report / "breakdown.csv").empty
    assert "Not profiled: bf16_copy at batch 4 on pypi · cpu; float32 at batch 4" in html
