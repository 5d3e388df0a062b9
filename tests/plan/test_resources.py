"""What a timing job asks the scheduler for, on this machine and on a cluster's targets."""


import pytest
from workflow_helpers import composed

from mptbench.plan.resources import Timing, slot

TARGETS = "sweep.targets={v100: {constraint: v100}, a100: {constraint: a100}}"


def asked(timing, job, **given):
    """What a job asks for: each resource's value for its wildcards."""
    resources = timing.resources(**given)
    return {key: value(job) if callable(value) else value for key, value in resources.items()}


@pytest.fixture(scope="module")
def local():
    return composed("smoke", "sweep.machine=box")


@pytest.fixture(scope="module")
def cluster():
    return composed("smoke", "device.check_present=false", "sweep.devices=[cpu,gpu0]", TARGETS)


def test_a_cpu_job_takes_every_core_and_the_cpus_slot(local):
    timing = Timing(local, ["cpu", "gpu0"], cores=6)
    job = {"machine": "box", "device": "cpu"}
    assert timing.threads(job) == 6
    assert asked(timing, job) == {
        "timing_cpu": 1,
        "timing_gpu0": 0,
        "mem_mb": local["device"]["cpu"]["mem_mb"],
        "runtime": local["device"]["cpu"]["runtime_min"],
        "gpu": 0,
    }


def test_without_cores_a_cpu_job_takes_one_thread_and_the_profile_decides(local):
    assert Timing(local, ["cpu"], cores=None).threads({"device": "cpu"}) == 1


def test_a_gpu_job_on_a_target_asks_for_its_nodes_and_one_gpu(cluster):
    timing = Timing(cluster, ["cpu", "gpu0"], cores=None)
    job = {"machine": "a100", "device": "gpu0"}
    assert timing.threads(job) == cluster["device"]["gpu"]["threads"]
    assert asked(timing, job) == {
        "timing_cpu": 0,
        "timing_gpu0": 1,
        "constraint": "a100",
        "mem_mb": cluster["device"]["gpu"]["mem_mb"],
        "runtime": cluster["device"]["gpu"]["runtime_min"],
        "gpu": 1,
    }
    assert asked(timing, {"machine": "v100", "device": "cpu"})["constraint"] == "v100"


def test_a_calibration_asks_for_its_own_runtime(local):
    timing = Timing(local, ["cpu"], cores=2)
    assert asked(timing, {"machine": "box", "device": "cpu"}, runtime=30)["runtime"] == 30


def test_each_device_has_its_own_slot():
    slots = [slot(d) for d in ("cpu", "gpu0", "gpu1")]
    assert slots == ["timing_cpu", "timing_gpu0", "timing_gpu1"]
