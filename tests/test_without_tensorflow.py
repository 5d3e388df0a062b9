"""A machine with JAX and no TensorFlow times cells: synthetic data, the jax backend, and a cell
path that never imports TensorFlow (here hidden from every process the job starts)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mptbench.config import Cell, compose_config, run_config
from mptbench.data.synthetic import prepared_info

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
pytestmark = pytest.mark.slow

# Imported first by every Python process that has this folder on PYTHONPATH.
HIDE_TENSORFLOW = """
import sys

class HideTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_datasets", "tf_keras"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden)", name=name)
        return None

sys.meta_path.insert(0, HideTensorFlow())
"""


@pytest.fixture(scope="module")
def no_tensorflow(tmp_path_factory):
    """An environment in which `import tensorflow` fails, in the job and in its children."""
    folder = tmp_path_factory.mktemp("hide_tf")
    (folder / "sitecustomize.py").write_text(HIDE_TENSORFLOW)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(ROOT / "src")]))
    env.pop("KERAS_BACKEND", None)
    check = subprocess.run(
        [sys.executable, "-c", "import tensorflow"], env=env, capture_output=True, text=True
    )
    assert check.returncode != 0 and "hidden" in check.stderr
    return env


def test_a_jax_cell_on_synthetic_data_runs_with_tensorflow_hidden(
    tmp_path, no_tensorflow, tracking
):
    cfg = compose_config(
        CONF,
        "smoke",
        [
            "dataset=synthetic",
            "dataset.image_size=32",
            "backend=[jax]",
            "policy=[float32,mixed_bfloat16]",
        ],
    )
    run = run_config(cfg, Cell("seed_convnet", "jax", "pypi", "cpu", "mixed_bfloat16", 8))
    run["train"].update(epochs=1, steps_per_epoch=8, warmup_steps=2, timed_steps=5,
                        min_timed_steps=3, precision=None, repeats=2)  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "prepared.json").write_text(json.dumps(prepared_info(cfg["dataset"])))
    (tmp_path / "tracking.json").write_text(json.dumps(tracking))
    record = tmp_path / "record.json"
    done = subprocess.run(
        [sys.executable, "-m", "mptbench.train.supervisor", "--run", str(tmp_path / "run.json"),
         "--prepared", str(tmp_path / "prepared.json"), "--tracking",
         str(tmp_path / "tracking.json"), "--record", str(record)],
        env=no_tensorflow, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "ok", data.get("reason")
    assert data["backend"] == "jax" and data["policy"] == "mixed_bfloat16"
    assert len(data["repeats"]) == 2 and data["ms_per_step"] > 0
    fingerprint = data["fingerprint"]
    assert fingerprint["jax"] and fingerprint["keras"] and fingerprint.get("tensorflow") is None
    assert data["dataset"] == "synthetic"
    # The cell's MLflow run carries the backend.
    import mlflow

    mlflow_run = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(data["mlflow_run_id"])
    assert mlflow_run.info.status == "FINISHED"
    assert mlflow_run.data.params["backend.name"] == "jax"
    assert mlflow_run.data.params["cell.backend"] == "jax"
