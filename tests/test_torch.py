"""Keras on PyTorch, every rule of the try-out: the seed convnet on the CPU in float32 against
mixed_bfloat16 and mixed_float16, its calibration and MFU, what fits, the parity check, the
report and MLflow, in a warm copy of the smoke run's checkout (a file of its own, so another
worker runs it beside test_workflow.py's runs)."""

import importlib.util

import mlflow
import pandas as pd
import pytest
from workflow_helpers import MACHINE, warm_run

from mptbench.core import isa

pytestmark = [
    pytest.mark.slow, pytest.mark.workflow,
    # The test extra leaves PyTorch out (from PyPI it is the CUDA build): README's test
    # command, which CI runs, installs its CPU wheel apart.
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="PyTorch is not installed: README's test command installs its CPU "
                              "wheel (torch==2.13.0+cpu)"),
]

POLICIES = {"float32", "mixed_bfloat16", "mixed_float16"}


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory, warm):
    """The try-out on Keras-on-PyTorch alone, at one batch size (what is checked is that every
    rule runs on it, not the timing); returns the copy and its combined output."""
    return warm_run(warm, tmp_path_factory.mktemp("torch"), "smoke", "name=smoke_torch",
                    "backend=[torch]", "sweep.batch_sizes=[4]", "train.repeats=1",
                    "train.max_repeats=1", "train.synthetic_twin=false",
                    # 10 steps a policy: a verdict all the same, and PyTorch's emulated float16
                    # made 30 most of this run
                    "train.parity_steps=10")


def test_keras_on_pytorch_runs_every_rule_and_says_what_it_cannot_give(torch_run):
    checkout, out = torch_run
    report = checkout / "results/smoke_torch/report"
    summary = pd.read_csv(report / "summary.csv")
    assert set(summary["backend"]) == {"torch"} and set(summary["policy"]) == POLICIES
    assert set(summary["outcome"]) == {"ok"}, summary[["policy", "outcome", "reason"]]
    assert summary["torch"].str.startswith("2.13.0").all()
    # Its own calibration (torch.matmul and conv2d per dtype), and an MFU against it: eager
    # PyTorch's small kernels vary more than the other backends' between the calibration's
    # moment and the cell's on a busy host (a suite run read one bfloat16 cell above its peak,
    # and said so), so one cell holding an MFU is what is asserted, every other said.
    assert summary["peak_tflops"].gt(0).all()
    printed = summary["mfu"].dropna()
    assert len(printed) and (printed.gt(0) & printed.le(1)).all()
    unsaid = summary[summary["mfu"].isna() & summary["peak_note"].isna()]
    assert unsaid.empty, unsaid[["policy", "peak_tflops"]]
    assert summary["fits_at_batch"].notna().all()  # the what-fits search ran on it
    assert summary["parity_verdict"].notna().any()  # and the parity check
    # PyTorch's convolutions go through oneDNN too: its kernels are named like TensorFlow's.
    bf16 = summary.set_index("policy").loc["mixed_bfloat16"]
    assert isinstance(bf16["kernel_isa"], str)
    if not isa.lacks("AVX512_CORE", isa.cpu_flags()):  # and where the CPU has AVX-512, those
        assert isa.place(bf16["kernel_isa"]) >= isa.place("avx512_core")
    html = (report / "index.html").read_text()
    assert "PyTorch 2.13.0" in html  # the header names every framework's version
    section = html.split(f'<section id="{MACHINE}-seed_convnet-torch-pypi-cpu">', 1)[1]
    assert "op-level profiles are read for the tensorflow backend only, not torch" in section
    client = mlflow.MlflowClient(f"sqlite:///{checkout / 'results/mlflow.db'}")
    experiment = client.get_experiment_by_name("smoke_torch")
    cells = client.search_runs([experiment.experiment_id], "tags.backend = 'torch'")
    assert len(cells) == len(POLICIES)
    assert all("ms_per_step" in run.data.metrics for run in cells)
