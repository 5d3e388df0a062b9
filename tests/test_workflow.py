"""The workflow as a user runs it: snakemake on the smoke experiments, lint, and dry runs.

One smoke run (conftest.smoke_run) is shared; the runs that add to it (a policy, your model)
reuse its cache, environment and calibration in its checkout, in order (smoke_backends and the
variants run in warm copies of their own: test_smoke_backends.py, test_variants.py). Lint and
dry runs use a fresh checkout and wait for no training."""

import itertools
import json
import shutil
import sqlite3
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from workflow_helpers import (
    MACHINE,
    SMOKE,
    SMOKE_CELLS,
    SMOKE_PX,
    active_runs,
    copy_workflow,
    every_cell_has_an_mfu,
    job_counts,
    snakemake,
)

from mptbench.core.opclasses import CLASSES, OP_CLASSES
from mptbench.jobs.profiles import closure

pytestmark = [pytest.mark.slow, pytest.mark.workflow]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smoke(smoke_run):
    return smoke_run[0]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A fresh copy of the workflow that has run nothing: for lint and dry runs."""
    return copy_workflow(tmp_path_factory.mktemp("fresh"))


def test_a_finished_run_tells_where_the_report_is_and_its_headline(smoke_run):
    _, output = smoke_run
    assert "mptbench smoke: the report is results/smoke/report/index.html" in output
    assert "snakemake --report results/smoke/report.zip --config experiment=smoke" in output
    assert (
        "mlflow ui --backend-store-uri sqlite:///results/mlflow.db, then open "
        "http://127.0.0.1:5000/#/experiments/1?workflowType=machine_learning"
    ) in output
    # The answer's lead among the last lines, its details under it; the group's cells counted,
    # and no second line judging a policy against float32.
    lead, *rest = output.split("  MLflow: ", 1)[1].splitlines()[1:]
    assert lead.startswith(("  seed_convnet on cpu: Use ", "  seed_convnet on cpu: Keep float32"))
    details = list(itertools.takewhile(lambda line: line.startswith("    "), rest))
    assert len(details) >= 3 and "images/s" in details[0]
    assert rest[len(details)] == (
        "  seed_convnet on tensorflow · pypi · cpu: 6 of 6 cells ran, 0 over budget, 0 failed")
    assert not any("best of" in line and "faster" in line for line in rest)


def test_smoke_run_reports_every_cell(smoke):
    summary = pd.read_csv(smoke / "results/smoke/report/summary.csv")
    assert len(summary) == SMOKE_CELLS
    assert set(summary["outcome"]) == {"ok"}
    assert set(summary["model"]) == {"seed_convnet"} and set(summary["backend"]) == {"tensorflow"}
    every_cell_has_an_mfu(summary)
    assert (summary["flops_per_step"] > 0).all()
    assert (summary["ms_per_step"] > 0).all()
    # float32 against what a CPU with AVX512_BF16 or AMX runs fast, and the 2020 policy.
    assert set(summary["policy"]) == {"float32", "mixed_bfloat16", "mixed_float16"}
    assert summary.set_index("policy")["baseline"].to_dict() == {
        "float32": True, "mixed_bfloat16": False, "mixed_float16": False}
    assert set(summary["batch_size"]) == {4, 8}
    # Every figure with its interval, each cell timed in train.repeats processes (the smoke's 2).
    repeats = SMOKE["train"]["repeats"]
    assert (summary["ms_per_step_ci_low"] <= summary["ms_per_step"]).all()
    assert (summary["ms_per_step"] <= summary["ms_per_step_ci_high"]).all()
    assert set(summary["repeats"]) == {repeats}
    mixed = summary[summary["policy"] != "float32"]
    assert mixed["speedup_ci_low"].notna().all() and mixed["speedup_verdict"].notna().all()
    # Both policies of a batch size took turns in the same processes: paired.
    assert mixed["speedup_paired"].all() and set(mixed["speedup_processes"]) == {repeats}
    assert (summary["input_bound_ratio_ci_low"] <= summary["input_bound_ratio"]).all()
    assert summary["predicted_step_s"].notna().all() and summary["prediction_error"].notna().all()
    # The whole run (2 epochs with validation after each), with its interval; the host's speed.
    assert (summary["fullrun_s_ci_low"] <= summary["fullrun_s"]).all()
    assert (summary["fullrun_validation_s"] > 0).all() and set(summary["fullrun_epochs"]) == {2}
    assert mixed["fullrun_speedup"].notna().all() and (summary["host_slowdown"] >= 1).all()
    html = (smoke / "results/smoke/report/index.html").read_text()
    assert "<table" in html and ".png" in html
    assert "Tesla V100" in html  # the published numbers beside ours
    assert html.count("<section id=") == 1  # one model, backend, variant and device
    # Runs link to the MLflow UI that `mlflow ui` serves for this store.
    assert 'href="http://127.0.0.1:5000/#/experiments/' in html


def test_one_train_job_interleaves_the_groups_processes_and_rotates_their_order(smoke):
    """The smoke's series: 2 groups (batch 4 and 8) of 2 processes each, one train job. Each
    group's processes are spread among the other's: both groups' first processes ran before
    either's second; within each process the policy that went first alternates."""
    runs = sorted((smoke / "results/smoke/runs").rglob("*.json"))
    records = [json.loads(p.read_text()) for p in runs]
    sequence = {(r["batch_size"], x["repeat"]): x["sequence"] for r in records
                for x in r["repeats"]}
    assert sorted(sequence.values()) == [0, 1, 2, 3]  # one place per process of the job
    assert max(sequence[(4, 1)], sequence[(8, 1)]) < min(sequence[(4, 2)], sequence[(8, 2)])
    for record in records:  # three policies: each process starts with another
        positions = [x["position"] for x in record["repeats"]]
        assert len(set(positions)) == 2, positions
    assert [p.name for p in (smoke / "results/smoke/logs/train").rglob("*.log")] == ["cpu.log"]


def test_smoke_cells_are_profiled_in_every_repeat_and_their_classes_close(smoke):
    report = smoke / "results/smoke/report"
    summary = pd.read_csv(report / "summary.csv").set_index(["model", "policy", "batch_size"])
    breakdown = pd.read_csv(report / "breakdown.csv")
    assert len(breakdown) == len(CLASSES) * len(summary)  # every ok cell, every class
    cells = breakdown.groupby(["model", "policy", "batch_size"])
    for key, rows in cells:
        measured, by_class = summary.loc[key], rows.set_index("op_class")
        classes = by_class["ms_per_step"]
        # The first train.profile_repeats (2) processes profiled: each class's median with its
        # range over them.
        assert (by_class["profiles"] == min(measured["repeats"], 2)).all()
        assert (by_class["ms_min"] <= classes).all() and (classes <= by_class["ms_max"]).all()
        # The profiled step and the timed step side by side, as measured. The measured classes
        # close on the train function's part of the profiled step; on the whole of it only
        # where the step is long (tests/jobs/test_profiles): a smoke step is 8-25 ms, and
        # under a full test run the Python around it took up to 40%.
        assert (by_class["timed_ms_per_step"] == measured["ms_per_step"]).all()
        assert (by_class["profiled_ms_per_step"] == measured["profiled_ms_per_step"]).all()
        first = by_class.iloc[0]
        assert 0 < first["function_ms_per_step"] <= first["profiled_ms_per_step"]
        on_function = closure(classes.to_dict(), first["threads"], first["function_ms_per_step"])
        assert on_function["closure"] == pytest.approx(1, abs=0.15)
        assert 0 < first["closure"] < 1.15
        assert by_class.loc["background_input", "ms_per_step"] > 0
        assert not by_class.loc["background_input", "in_step"]
        assert classes["framework"] > 0 and classes["idle"] > 0
        assert classes["conv_forward"] > 0 and classes["conv_backward_filter"] > 0
        if key[1] == "float32":
            assert classes["cast"] == 0 and classes["loss_scaling"] == 0
        else:  # both mixed policies cast; only float16 scales its loss
            assert classes["cast"] > 0
            assert (classes["loss_scaling"] > 0) == (key[1] == "mixed_float16")
    # The same ops by layer (layers.csv): every profiled cell, its convolutions in its Conv2D
    # layers, each mixed cell beside float32's same layer, and they add up to its op classes
    # (2 profiles: the median of each row is their mean, as the classes' is).
    layers = pd.read_csv(report / "layers.csv")
    for key, rows in layers.groupby(["model", "policy", "batch_size"]):
        by_class = cells.get_group(key).set_index("op_class")["ms_per_step"]
        ops = by_class[[c for c in OP_CLASSES if c != "background_input"]].sum()
        assert rows["ms_per_step"].sum() == pytest.approx(ops, rel=0.01), key
        convs = rows[rows["layer_type"] == "Conv2D"]
        assert {"conv_forward", "conv_backward_filter"} <= set(convs["op_class"]), key
        assert rows["baseline_ms_per_step"].notna().all(), key
    assert len(layers.groupby(["model", "policy", "batch_size"])) == SMOKE_CELLS
    profiles = list((smoke / "results/smoke/profiles").rglob("*.xplane.pb"))
    assert len(list(cells)) == SMOKE_CELLS
    assert len(profiles) == 2 * len(summary)  # the raw profiles, for TensorBoard/XProf
    html = (report / "index.html").read_text()
    section = html.split(f'<section id="{MACHINE}-seed_convnet-tensorflow-pypi-cpu">', 1)[1]
    where = section.split("</section>", 1)[0].split("<h3>Where the time went</h3>", 1)[1]
    assert "mixed_float16 vs float32 at batch 8" in where
    assert "; net " in where and "(speedup_vs_baseline)" in where
    for row in ("unattributed", "profiled step", "timed step (no profiler)", "background input"):
        assert f"<td>{row}" in where or f">{row}" in where, row
    assert ">layer type" in where and ">Conv2D" in where  # the comparison by layer type too
    assert "The measured classes account for" in where and "host overhead" not in html
    assert f'<img src="{MACHINE}/seed_convnet/tensorflow/pypi/cpu/breakdown.png"' in section
    assert "Not profiled" not in where


def test_every_cell_has_its_peak_memory_and_the_report_says_what_fits(smoke):
    summary = pd.read_csv(smoke / "results/smoke/report/summary.csv")
    assert (summary["peak_memory_mb"] > 100).all()  # TensorFlow alone takes more
    assert set(summary["peak_memory_source"]) <= {"cgroup memory.max_usage_in_bytes",
                                                  "cgroup memory.peak", "VmHWM"}
    assert (summary["fits_at_batch"]).all() and set(summary["largest_fit_batch"]) == {8}
    mixed = summary[summary["policy"] == "mixed_float16"]
    assert mixed["memory_vs_baseline"].between(0.3, 3).all()
    fits = json.loads((smoke / f"results/smoke/fits/{MACHINE}/seed_convnet/tensorflow/pypi/cpu/"
                       "mixed_float16.json").read_text())
    assert [t["batch_size"] for t in fits["tries"]] == [4, 8]  # the grid's, up to its largest
    assert fits["stopped_by"] == "every batch up to the cap fit (sweep.max_batch=8)"
    html = (smoke / "results/smoke/report/index.html").read_text()
    section = html.split("<h3>What fits</h3>", 1)[1].split("<h3>", 1)[0]
    assert "mixed_float16 and float32 both fit every batch tried, up to 8" in section
    assert (
        "Published (2020), Quadro M2200 (4 GB): mixed_float16 fit batch 256 where float32 "
        "fit 128" in section
    )


def test_the_report_says_whether_each_policy_still_learns(smoke):
    # Under the fast plan each policy is checked at its fastest batch in the timing (which one
    # that is, is the machine's doing): mixed_float16's group was trained, every policy in it
    # from the baseline's seed and the baseline once more from a second, and the other group's
    # file says why each policy it left out was not checked there.
    folder = smoke / f"results/smoke/parity/{MACHINE}/seed_convnet/tensorflow/pypi/cpu"
    found = {b: json.loads((folder / f"bs{b}.json").read_text()) for b in (4, 8)}
    batch = next(b for b, p in found.items() if "mixed_float16" in p["policies"])
    parity, other = found[batch], found[12 - batch]
    steps = SMOKE["train"]["parity_steps"]
    assert parity["outcome"] == "ok" and parity["steps"] == steps
    runs = {(r["policy"], r["seed"]): r for r in parity["runs"]}
    checked = {name for name in parity["policies"] if name != "float32"}
    assert set(runs) == {("float32", 0), ("float32", 1)} | {(name, 0) for name in checked}
    assert checked | set(parity["left_out"]) == {"mixed_float16", "mixed_bfloat16"}
    assert "mixed_float16" in other["left_out"] and (
        "its fastest batch in the timing is" in other["left_out"]["mixed_float16"])
    assert all(len(r["losses"]) == steps for r in runs.values())
    mixed = runs[("mixed_float16", 0)]
    assert len(mixed["loss_scale"]) == steps and mixed["initial_loss_scale"] == 2.0**15
    figures = parity["policies"]["mixed_float16"]
    assert figures["verdict"] in ("follows the baseline", "ends higher", "ends lower")
    assert figures["seed_spread"] > 0 and figures["end_loss"] > 0
    html = (smoke / "results/smoke/report/index.html").read_text()
    section = html.split("<h3>Does it still learn?</h3>", 1)[1].split("</section>", 1)[0]
    assert f"mixed_float16 at batch {batch}, {steps} steps: " in section
    assert "float32&#39;s own seed-to-seed spread" in section and "loss scale 32768" in section
    assert "validation accuracy" in section  # the smoke validates
    summary = pd.read_csv(smoke / "results/smoke/report/summary.csv").set_index(
        ["policy", "batch_size"]
    )
    assert summary.loc[("mixed_float16", batch), "parity_verdict"] == figures["verdict"]
    assert summary.loc[("float32", batch), "parity_verdict"] == "baseline"
    assert summary.loc[("mixed_float16", batch), "parity_seed_spread"] == pytest.approx(
        figures["seed_spread"]
    )
    plot = smoke / f"results/smoke/report/{MACHINE}/seed_convnet/tensorflow/pypi/cpu/learning.png"
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_each_device_has_its_own_plots_table_and_diagnosis(smoke):
    group = smoke / f"results/smoke/report/{MACHINE}/seed_convnet/tensorflow/pypi/cpu"
    for name in ("ms_per_step.png", "speedup.png", "tflops.png", "breakdown.png"):
        assert (group / name).read_bytes().startswith(b"\x89PNG"), name
    table = pd.read_csv(group / "table.csv")
    assert list(table["batch size"]) == [4, 8]
    assert table["mixed_float16 (speedup vs float32)"].str.contains("95% CI").any()
    diagnosis = (group / "diagnosis.html").read_text()
    assert diagnosis.count("<li>") >= 4 and "(speedup_vs_baseline)" in diagnosis


def test_snakemakes_report_holds_the_results_by_device(smoke):
    done = snakemake(smoke, "--report", "results/smoke/report.zip", "--config", "experiment=smoke")
    assert done.returncode == 0, done.stderr[-3000:]
    import zipfile

    names = zipfile.ZipFile(smoke / "results/smoke/report.zip").namelist()
    for name in ("summary.csv", "breakdown.csv", "layers.csv", "index.html",
                 "published_ms_per_step.png",
                 "speedup.png", "tflops.png", "table.csv", "diagnosis.html"):
        assert any(n.endswith(name) for n in names), name


def test_smoke_run_logs_one_mlflow_run_per_cell(smoke):
    db = smoke / "results/mlflow.db"
    runs = active_runs(db, "smoke")
    assert len(runs) == SMOKE_CELLS + 1 and {status for _, status in runs} == {"FINISHED"}
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("smoke")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`mptbench.sweep` = 'smoke'")
    children = client.search_runs(
        [experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    assert len(children) == SMOKE_CELLS
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "report")} >= {
        "report/index.html",
        "report/summary.csv",
        "report/headline.txt",
        f"report/{MACHINE}",
    }
    assert f"best_speedup.{MACHINE}.seed_convnet.tensorflow.pypi.cpu" in parent.data.metrics
    ran = parent.data.metrics[f"cells_ran.{MACHINE}.seed_convnet.tensorflow.pypi.cpu"]
    assert ran == SMOKE_CELLS
    for child in children:
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        tags = child.data.tags
        assert {"machine", "backend", "variant", "device", "policy", "batch_size",
                "outcome"} <= set(tags) and tags["machine"] == MACHINE
        assert {"logs", "run_record.json", "profile"} <= artifacts
        assert "breakdown_conv_forward_ms" in child.data.metrics
        assert child.inputs.dataset_inputs[0].dataset.name == f"imagenette2-320-smoke-{SMOKE_PX}px"
        # What the report worked out, given back to the cell's run by the aggregate job.
        if tags["policy"] == "mixed_float16":
            assert "speedup_vs_baseline" in child.data.metrics and "speedup_verdict" in tags
    assert len(client.search_runs([experiment.experiment_id], "tags.policy = 'mixed_float16'")) == 2
    runs = [r for r in runs if r[0] != parent.info.run_id]
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
        smoke, "data", "-n", "--config", "experiment=smoke", "overrides=[dataset.image_size=48]"
    )
    assert dry.returncode == 0, dry.stderr
    # The archive is cached: only the new size's cache is built, and nothing is trained.
    assert job_counts(dry.stdout + dry.stderr) == {"prepare": 1, "data": 1, "total": 2}


def test_synthetic_data_needs_no_download_and_no_cache(checkout):
    overrides = 'overrides=["dataset=synthetic","backend=[jax]","name=synthetic_dry"]'
    dry = snakemake(checkout, "-n", "--config", "experiment=smoke", overrides)
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = job_counts(dry.stdout + dry.stderr)
    assert "download" not in counts and "make_fixture" not in counts
    # One train job for the series: its 2 batch sizes' groups, each timing both policies.
    assert counts["prepare"] == 1 and counts["train"] == 1


def test_config_keys_as_people_type_them(checkout):
    """The plain form README shows first: each --config key a group or a mapping of values."""
    dry = snakemake(
        checkout, "-n", "--config", "experiment=smoke", "policy=[float32,mixed_bfloat16]",
        "model=mobilenet_v2", "sweep={batch_sizes: [4, 8, 16]}", "dataset={image_size: 32}",
        "name=plain",
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    out = dry.stdout + dry.stderr
    assert job_counts(out)["train"] == 1  # the series: a group per batch size, interleaved
    cell = "mobilenet_v2/tensorflow/pypi/cpu/mixed_bfloat16/bs16"
    assert f"results/plain/runs/{MACHINE}/{cell}.json" in out
    typo = snakemake(checkout, "-n", "--config", "experiment=smoke", "sweep={batch_size: [4]}")
    assert typo.returncode != 0
    lines = (typo.stdout + typo.stderr).splitlines()
    assert (
        lines.count(
            "mptbench config: override of unknown key 'sweep.batch_size': no such key in the config"
        )
        == 1
    )


def test_lint_is_clean(checkout):
    lint = snakemake(checkout, "--lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "Congratulations" in lint.stdout + lint.stderr


def test_default_dry_run_lists_the_full_grid(checkout):
    dry = snakemake(checkout, "-n")
    assert dry.returncode == 0, dry.stderr
    out = dry.stdout + dry.stderr
    # CPU only here: 3 policies x 5 batch sizes, one series of 5 groups in one train job.
    assert job_counts(out)["train"] == 1
    cell = "seed_convnet/tensorflow/pypi/cpu/mixed_bfloat16/bs512"
    assert f"results/benchmark/runs/{MACHINE}/{cell}.json" in out
    assert "imagenette2-320.tgz" in out


def test_bad_config_fails_before_any_job_with_one_line(checkout):
    bad = snakemake(checkout, "-n", "--config", "overrides=[sweep.batch_sizes=[0]]")
    assert bad.returncode != 0
    assert (
        "mptbench config: sweep.batch_sizes[0]: 0 is not an integer >= 1" in bad.stdout + bad.stderr
    )
    assert not (checkout / "results" / "benchmark").exists()


def test_policies_added_by_override_alone_get_their_dtype_and_a_renamed_baseline(smoke):
    """Adding a policy is adding its facts: no table in the code needs to know its name, not
    even the baseline's (here fp32, with float32 left out)."""
    overrides = (
        'overrides=["name=smoke_policy","policy=[]","sweep.batch_sizes=[4]",'
        '"train.profile_steps=0","train.max_step_seconds=null","sweep.fit_search=false",'
        '"train.parity_steps=0","train.synthetic_twin=false","train.validation_steps=0",'
        '"+policy.fp32={compute_dtype:float32,variable_dtype:float32,loss_scaling:none,'
        'baseline:true}",'
        '"+policy.bf16_copy={compute_dtype:bfloat16,variable_dtype:float32,loss_scaling:none}"]'
    )
    done = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke", overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = pd.read_csv(smoke / "results/smoke_policy/report/summary.csv").set_index("policy")
    assert list(summary.index) == ["bf16_copy", "fp32"]
    assert summary.loc["bf16_copy", "compute_dtype"] == "bfloat16"
    assert summary.loc["bf16_copy", "outcome"] == "ok"
    assert summary.loc["fp32", "baseline"] and not summary.loc["bf16_copy", "baseline"]
    assert summary.loc["fp32", "speedup_vs_baseline"] == 1.0
    # Paired over the rounds both took turns in, so near (not equal to) the medians' ratio.
    row = summary.loc["bf16_copy"]
    assert row["speedup_ci_low"] <= row["speedup_vs_baseline"] <= row["speedup_ci_high"]
    assert row["speedup_vs_baseline"] == pytest.approx(
        summary.loc["fp32", "ms_per_step"] / row["ms_per_step"], rel=0.25
    )
    assert summary.loc["bf16_copy", "speedup_verdict"] in ("faster", "slower",
                                                           "no measurable difference")
    # Its own calibration: the smoke grid's models timed at its largest batch, 4.
    row = summary.loc["bf16_copy"]
    assert row["calibration"].startswith(f"results/calibration/{MACHINE}/tensorflow/pypi/cpu/")
    calibration = json.loads((smoke / row["calibration"]).read_text())
    assert calibration["model_batch"] == 4
    # Its convolution FLOPs at the bfloat16 conv peak, its dense FLOPs at the matmul peak.
    seconds = row["conv_flops_per_step"] / (calibration["conv"]["bfloat16"]["tflops"] * 1e12)
    seconds += row["matmul_flops_per_step"] / (calibration["matmul"]["bfloat16"]["tflops"] * 1e12)
    bf16_peak = row["flops_per_step"] / seconds / 1e12
    assert row["peak_tflops"] == pytest.approx(bf16_peak)
    assert summary.loc["bf16_copy", "mfu"] == pytest.approx(
        summary.loc["bf16_copy", "achieved_tflops"] / bf16_peak
    )
    html = (smoke / "results/smoke_policy/report/index.html").read_text()
    diagnosis = html.split("<h3>Diagnosis</h3>", 1)[1].split("</ul>", 1)[0]
    assert "bf16_copy against fp32 (speedup_vs_baseline)" in diagnosis
    assert "bf16_copy reached" in diagnosis and "bfloat16 peak" in diagnosis
    # train.profile_steps=0: no breakdown, and the report says so rather than guessing.
    report = smoke / "results/smoke_policy/report"
    assert pd.read_csv(report / "breakdown.csv").empty
    assert (
        "Not profiled: bf16_copy at batch 4 of seed_convnet on tensorflow · pypi · cpu; fp32 at"
    ) in html


@pytest.fixture(scope="module")
def user_images(smoke):
    """A folder of class folders of images, and the README's model, in the checkout."""
    from PIL import Image

    root = smoke / "my_images"
    for i, name in enumerate(("apples", "pears")):
        (root / name).mkdir(parents=True, exist_ok=True)
        for n in range(12):
            Image.new("RGB", (48, 40), (100 * i, 50 + n, 90)).save(root / name / f"{n}.png")
    shutil.copy(ROOT / "examples/mymodels.py", smoke / "mymodels.py")
    return root


def test_your_model_on_your_images(smoke, user_images):
    """Your builder on your folder of images, through every rule; timed once, without the probe,
    profile and twin (what is checked is that your model and images arrive, not the timing)."""
    overrides = (
        'overrides=["name=smoke_user","model=python","model.python.builder=mymodels:small_cnn",'
        f'"dataset=image_folder","dataset.path={user_images}","dataset.name=my-images",'
        '"dataset.image_size=32","policy=[float32]","sweep.batch_sizes=[4]","backend=[tensorflow]",'
        '"sweep.fit_search=false","train.repeats=1","train.max_repeats=1",'
        '"train.max_step_seconds=null","train.profile_steps=0","train.synthetic_twin=false",'
        '"train.validation_steps=0"]'
    )
    done = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke", overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "download" not in job_counts(done.stdout + done.stderr)  # read where it is
    (row,) = pd.read_csv(smoke / "results/smoke_user/report/summary.csv").itertuples()
    assert (row.model, row.outcome, row.builder) == ("python", "ok", "mymodels:small_cnn")
    assert len(row.builder_sha256) == 64 and row.flops_per_step > 0
    record = json.loads(next((smoke / "results/smoke_user/runs").rglob("*.json")).read_text())
    assert record["dataset"] == "my-images"
    prepared = json.loads(next((smoke / "resources/tfds").glob("my-images-32px.json")).read_text())
    assert prepared["classes"] == ["apples", "pears"]
    assert prepared["splits"] == {"train": 22, "validation": 2}


def test_a_broken_builder_fails_before_any_cell_with_one_line(smoke, user_images):
    (smoke / "broken.py").write_text("def model(shape, classes, policy):\n    return 42\n")
    overrides = (
        'overrides=["name=smoke_broken","model=python","model.python.builder=broken:model",'
        '"policy=[float32]","sweep.batch_sizes=[4]","backend=[tensorflow]"]'
    )
    done = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke", overrides)
    assert done.returncode != 0
    logs = [p.read_text() for p in (smoke / "results/models/python").glob("*.log")]
    (log,) = [text for text in logs if "broken:model" in text]
    assert log.strip().splitlines()[-1] == (
        "error: model.builder broken:model returned int, not a keras.Model"
    )
    assert not (smoke / "results/smoke_broken/runs").exists()
    assert not (smoke / "results/smoke_broken/probes").exists()
