"""The smoke_backends experiment: two models side by side on TensorFlow, and the seed convnet on
two Keras backends (MobileNetV2 lists TensorFlow alone: model.<name>.backends), in a warm copy
of the smoke run's checkout (a file of its own, so another worker runs it beside
test_workflow.py's runs)."""

import mlflow
import pandas as pd
import pytest
from workflow_helpers import MACHINE, every_cell_has_an_mfu, warm_run

pytestmark = [pytest.mark.slow, pytest.mark.workflow]

# The (model, backend) pairs that run: each with float32 and mixed_bfloat16 at batch 4.
CELLS = {("seed_convnet", "tensorflow"), ("seed_convnet", "jax"), ("mobilenet_v2", "tensorflow")}


@pytest.fixture(scope="module")
def backends_run(tmp_path_factory, warm):
    """The smoke_backends experiment (two models, two Keras backends) in a warm copy of its
    own (so another worker runs it beside the smoke checkout's tests); returns the copy and its
    combined output."""
    # One process per group: what is checked here is which cells ran where and what the report
    # says of them, not an interval (smoke's two processes per group show those).
    return warm_run(warm, tmp_path_factory.mktemp("backends"), "smoke_backends",
                    "train.repeats=1", "train.max_repeats=1")


def test_two_models_and_two_backends_are_compared_side_by_side(backends_run):
    checkout, backends_run = backends_run
    # One answer per model, over both of its backends (one process a cell: no interval, so no
    # verdict); then each group's cells, and no line that judges a pair a second time.
    leads = [line for line in backends_run.splitlines() if line.startswith("  ") and
             line.lstrip().startswith(("mobilenet_v2 on cpu: ", "seed_convnet on cpu: "))]
    assert len(leads) == 2 and all(": No verdict: " in line for line in leads), leads
    for model, backend in CELLS:
        assert f"{model} on {backend} · pypi · cpu: 2 of 2 cells ran, 0 over budget, 0 failed" in (
            backends_run)
    assert "mobilenet_v2 on jax" not in backends_run
    assert "model mobilenet_v2 runs on tensorflow only: no jax cells with it" in backends_run
    assert "best of" not in backends_run and "best: " not in backends_run
    report = checkout / "results/smoke_backends/report"
    summary = pd.read_csv(report / "summary.csv")
    assert len(summary) == 2 * len(CELLS) and set(summary["outcome"]) == {"ok"}
    assert set(zip(summary["model"], summary["backend"], strict=True)) == CELLS
    # Each backend's cells are compared with its own calibrated peak.
    assert summary.groupby("backend")["peak_tflops"].nunique().min() >= 1
    jax = summary[summary["backend"] == "jax"]
    assert jax["jax"].notna().all()
    every_cell_has_an_mfu(summary)
    # Counted per model: MobileNetV2 (2.3 M parameters) against the seed convnet (1.1 M).
    per_model = summary.groupby("model")["parameters"].max()
    assert per_model["mobilenet_v2"] > 2 * per_model["seed_convnet"] > 2e6
    html = (report / "index.html").read_text()
    assert html.count("<section id=") == len(CELLS)  # one per model and backend
    assert html.count('<p class="lead">') == 2  # one answer per model
    backends = html.split('<h2 id="backends">Backends compared</h2>', 1)[1].split("<h2", 1)[0]
    table = backends.split("<h3>seed_convnet · pypi · cpu", 1)[1].split("</table>", 1)[0]
    assert table.count('<td class="text">jax</td>') == 1
    assert table.count('<td class="text">tensorflow</td>') == 1
    # Profiles are read from TensorFlow's profiler; a JAX cell says why it has none.
    assert set(pd.read_csv(report / "breakdown.csv")["backend"]) == {"tensorflow"}
    section = html.split(f'<section id="{MACHINE}-seed_convnet-jax-pypi-cpu">', 1)[1]
    section = section.split("</section>")[0]
    assert (
        "Not profiled: float32 at batch 4 of seed_convnet on jax · pypi · cpu (op-level "
        "profiles are read for the tensorflow backend only, not jax)"
    ) in section
    # The MLflow runs carry the backend, and only TensorFlow's keep a profile.
    client = mlflow.MlflowClient(f"sqlite:///{checkout / 'results/mlflow.db'}")
    experiment = client.get_experiment_by_name("smoke_backends")
    cells = client.search_runs([experiment.experiment_id], "tags.`mptbench.cell` != ''")
    assert len(cells) == 2 * len(CELLS)
    assert len(client.search_runs([experiment.experiment_id], "tags.backend = 'jax'")) == 2
    for child in cells:
        profiled = child.data.tags["backend"] == "tensorflow"
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert ("profile" in artifacts) == profiled
        assert ("breakdown_conv_forward_ms" in child.data.metrics) == profiled
