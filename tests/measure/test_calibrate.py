"""The calibrate rule's measurement, in the variant's own Python."""

import json

import pytest

from mptbench.measure.calibrate import calibrate_variant

SETTINGS = {
    "matmul_size": 256,
    "conv_shape": [2, 8, 8, 16, 16],
    "conv_kernel": 3,
    "min_seconds": 0.05,
}


@pytest.mark.slow
def test_calibrate_measures_every_dtype(tmp_path):
    out = tmp_path / "cpu.json"
    variant = {"name": "pypi", "env": {}, "jit_compile": "auto"}
    assert calibrate_variant("cpu", variant, SETTINGS, None, str(out)) == 0
    data = json.loads(out.read_text())
    assert set(data["matmul"]) == set(data["conv"]) == {"float32", "float16", "bfloat16"}
    assert all(v["tflops"] > 0 and v["iterations"] >= 1 for v in data["matmul"].values())
    assert data["matmul_vs_float32"]["float32"] == 1.0
    assert data["fingerprint"]["onednn"] in ("on", "off", "off (no oneDNN start-up message)")
    assert data["variant"] == "pypi" and data["device"] == "cpu"


def test_calibrate_fails_clearly_for_an_absent_gpu(tmp_path, capfd):
    out = tmp_path / "gpu0.json"
    variant = {"name": "pypi", "env": {}, "jit_compile": "auto"}
    assert calibrate_variant("gpu0", variant, SETTINGS, None, str(out)) == 1
    assert "gpu0 was asked for but TensorFlow sees no GPU" in capfd.readouterr().err
    assert not out.exists()
