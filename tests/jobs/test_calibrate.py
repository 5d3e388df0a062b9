"""The calibrate rule's measurement: an engine job in the variant's own Python."""

import json
from dataclasses import replace

import pytest

from mptbench.core.contract import Calibrate, ContractError, VariantConfig, decode
from mptbench.jobs.calibrate import calibrate_variant
from mptbench.jobs.launcher import EngineFailed

PYPI = VariantConfig("pypi", ("tensorflow", "jax"), "auto", {}, None, None, "PyPI packages")

SETTING = {
    "matmul": {"start": 64, "max": 256},
    "conv": {"batch": 2, "spatial": 8, "start_channels": 8, "max_channels": 32, "kernels": [3, 5]},
    "min_seconds": 0.05,
    "min_gain": 0.03,
    "cap_s": 3,
}
SETTINGS = decode(Calibrate, SETTING)


def test_a_calibration_is_given_every_setting_it_reads():
    """The engine reads device.<kind>.calibrate typed: a setting left out is an error naming
    it, not a default written a second time in the engine."""
    with pytest.raises(ContractError, match="missing field.s. min_gain"):
        decode(Calibrate, {k: v for k, v in SETTING.items() if k != "min_gain"})
    assert SETTINGS.conv.kernels == (3, 5) and SETTINGS.matmul.max == 256


@pytest.mark.slow
def test_calibrate_measures_every_dtype(tmp_path):
    out = tmp_path / "cpu.json"
    calibrate_variant("cpu", PYPI, SETTINGS, None, str(out))
    data = json.loads(out.read_text())
    assert set(data["matmul"]) == set(data["conv"]) == {"float32", "float16", "bfloat16"}
    assert all(v["tflops"] > 0 and v["iterations"] >= 1 for v in data["matmul"].values())
    # Each dtype's sizes grew from the smallest, and the best one is the peak.
    for kind in ("matmul", "conv"):
        for result in data[kind].values():
            tried = result["tried"]
            assert tried and result["tflops"] == max(t["tflops"] for t in tried)
            assert result["stopped"]
    assert data["matmul"]["float32"]["tried"][0]["size"] == 64
    assert {t["kernel"] for t in data["conv"]["float32"]["tried"]} <= {3, 5}
    assert data["settings"] == SETTING and data["jit_compile"] is False
    # Each dtype's ratio is its own matmul peak over float32's, as the report reads it.
    for dtype in ("float16", "bfloat16"):
        peak = data["matmul"][dtype]["tflops"] / data["matmul"]["float32"]["tflops"]
        assert data["matmul_vs_float32"][dtype] == pytest.approx(peak, rel=1e-3)
    assert data["fingerprint"]["onednn"] in ("on", "off", "off (no oneDNN start-up message)")
    assert data["variant"] == "pypi" and data["device"] == "cpu"


@pytest.mark.slow
def test_the_conv_peak_covers_the_models_own_convolutions(tmp_path):
    """A model whose own kernels (here 11x11, stride 2) run faster than the generic 3x3 and
    5x5 series is held to them: its layers are timed too, and the best of both is the peak."""
    info = tmp_path / "model.json"
    layers = [{"name": "conv2d", "input": [32, 32, 32], "filters": 64, "kernel": 11, "stride": 2}]
    info.write_text(json.dumps({
        "model": "seed", "kind": "layers", "input_shape": [64, 64, 3], "num_classes": 10,
        "parameters": 1, "training_flops_per_example": {}, "forward_flops_per_example": {},
        "flops_counted_by": "hand", "conv_layers": layers,
    }))
    out = tmp_path / "cpu.json"
    calibrate_variant("cpu", PYPI, SETTINGS, None, str(out), model_infos=[str(info)],
                      model_batch=4)
    data = json.loads(out.read_text())
    assert data["model_batch"] == 4
    for conv in data["conv"].values():
        own = conv["model_layers"]
        assert {t["layer"] for t in own["tried"]} == {"seed/conv2d"}
        assert {t["shape"][0] for t in own["tried"]} <= {2, 4}  # from conv.batch to the grid's
        assert conv["tflops"] == max(own["tflops"], max(t["tflops"] for t in conv["tried"]))
        assert conv["source"] in ("generic series", "the models' own layer seed/conv2d")
    # On this CPU the 11x11 kernel's float32 throughput beats the small generic shapes.
    assert data["conv"]["float32"]["source"] == "the models' own layer seed/conv2d"


@pytest.mark.slow
def test_an_xla_variant_is_calibrated_compiled(tmp_path):
    out = tmp_path / "xla.json"
    variant = replace(PYPI, name="pypi_xla", backends=("tensorflow",), jit_compile=True)
    small = replace(SETTINGS, cap_s=1, conv=replace(SETTINGS.conv, kernels=(3,)))
    assert calibrate_variant("cpu", variant, small, None, str(out)).jit_compile is True
    assert json.loads(out.read_text())["jit_compile"] is True


@pytest.mark.slow
def test_calibrate_fails_clearly_for_an_absent_gpu(tmp_path, capfd):
    out = tmp_path / "gpu0.json"
    with pytest.raises(EngineFailed, match="^gpu0 was asked for but this machine shows no GPU"):
        calibrate_variant("gpu0", PYPI, SETTINGS, None, str(out))
    assert "error: gpu0 was asked for but this machine shows no GPU" in capfd.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no result, no job file left behind
