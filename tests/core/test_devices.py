"""The one helper that says what kind a device is and how it is addressed."""

import pytest

from mptbench.core.devices import Device


def test_kinds_indices_and_environment():
    assert (Device("cpu").kind, Device("cpu").index, Device("cpu").gpus()) == ("cpu", None, 0)
    assert (Device("gpu3").kind, Device("gpu3").index, Device("gpu3").gpus()) == ("gpu", 3, 1)
    assert Device("cpu").environment() == {"CUDA_VISIBLE_DEVICES": ""}
    assert Device("gpu1").environment() == {"CUDA_VISIBLE_DEVICES": "1"}
    settings = {"cpu": {"mem_mb": 1}, "gpu": {"mem_mb": 2}}
    assert Device("gpu0").settings(settings) == {"mem_mb": 2}


def test_an_unknown_device_is_refused():
    with pytest.raises(ValueError, match="unknown device 'tpu0'"):
        Device("tpu0")
