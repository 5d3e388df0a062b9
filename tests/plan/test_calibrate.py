"""Which calibration a cell is compared with, and what its calibrate job measures."""

from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.plan import ConfigError, calibrate, grid

GPU_NODE = ["sweep.machine=box", "device.check_present=false"]


def smoke(*overrides, devices=("cpu", "gpu0")):
    cfg = composed("smoke", *GPU_NODE, *overrides)
    return cfg, grid(cfg, list(devices), ["box"])


def on(device, backend="tensorflow"):
    return {"machine": "box", "backend": backend, "variant": "pypi", "device": device}


@pytest.fixture(scope="module")
def two_devices():
    return smoke()


def test_each_device_has_its_own_calibration_which_all_its_cells_read(two_devices):
    cfg, cells = two_devices
    paths = calibrate.calibrations(cfg, cells)
    assert len(paths) == 2
    cpu, gpu = (calibrate.calibration(cfg, cells, on(d)) for d in ("cpu", "gpu0"))
    assert sorted(paths) == sorted([cpu, gpu])
    assert cpu.startswith("results/calibration/box/tensorflow/pypi/cpu/")
    for cell in cells:
        path = calibrate.calibration(cfg, cells, cell.wildcards("smoke"))
        assert path == (gpu if cell.device == "gpu0" else cpu)


def test_a_calibration_times_the_cells_models_at_their_largest_batch(two_devices):
    cfg, cells = two_devices
    assert calibrate.batch(cells, on("cpu")) == 8
    [model] = calibrate.models(cfg, cells, on("cpu"))
    assert model.startswith("results/models/seed_convnet/")
    larger, larger_cells = smoke("sweep.batch_sizes=[4,16]")
    assert calibrate.batch(larger_cells, on("cpu")) == 16
    assert calibrate.calibration(larger, larger_cells, on("cpu")) != calibrate.calibration(
        cfg, cells, on("cpu")
    )


def test_strict_float32_changes_the_gpus_calibration_not_the_cpus(two_devices):
    cfg, cells = two_devices
    strict, strict_cells = smoke("device.gpu.tf32=false")
    assert calibrate.tf32(cfg, on("gpu0")) is True
    assert calibrate.tf32(strict, on("gpu0")) is False
    assert calibrate.tf32(strict, on("cpu")) is True  # no TF32 on a CPU: nothing to turn off
    for device, changes in (("gpu0", True), ("cpu", False)):
        before = calibrate.calibration(cfg, cells, on(device))
        after = calibrate.calibration(strict, strict_cells, on(device))
        assert (before != after) == changes


def test_a_calibrate_job_measures_with_its_kinds_settings(two_devices):
    cfg, cells = two_devices
    path = Path(calibrate.calibration(cfg, cells, on("cpu")))
    job = {**on("cpu"), "settings": path.stem}
    assert calibrate.settings(cfg, cells, job) == cfg["device"]["cpu"]["calibrate"]


def test_a_calibration_named_for_other_settings_is_not_measured_here(two_devices):
    cfg, cells = two_devices
    job = {**on("cpu"), "settings": "000000000000"}
    with pytest.raises(ConfigError, match="000000000000.json: not measured with this"):
        calibrate.settings(cfg, cells, job)
