"""The job contract: a run and every engine job survive the one JSON codec, and a file another
version wrote fails with one line naming what does not fit."""

import json

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import (
    JOB_KINDS,
    ArmResult,
    Calibrate,
    CalibrateJob,
    ContractError,
    DescribeJob,
    EnvironmentJob,
    FitJob,
    ParityJob,
    ProbeJob,
    ProbePoint,
    ProbeResult,
    RepeatJob,
    RepeatResult,
    Run,
    decode,
    decode_job,
    encode,
)
from mptbench.core.contract.run import ConvSizes, MatmulSizes

CALIBRATE = Calibrate(MatmulSizes(64, 256), ConvSizes(2, 8, 8, 32, (3, 5)), min_seconds=0.05,
                      min_gain=0.03, cap_s=1)


def _through_json(data):
    return json.loads(json.dumps(data))


def test_a_run_comes_back_whole_and_typed():
    run = smoke_cell_run(policy="mixed_float16", batch_size=4)
    back = decode(Run, _through_json(encode(run)))
    assert back == run
    assert back.model.conv_layers[1].kernel_size == 7  # nested dataclasses, not dicts
    assert back.train.probe_batch_sizes == (2, 4)  # tuples stay tuples
    assert back.policy.keras_name == "mixed_float16" and back.block_steps == 1


def test_every_engine_job_kind_round_trips_by_its_kind():
    run = smoke_cell_run()
    jobs = [
        RepeatJob("out.json", (run, run), "prepared.json", 1, ("profiles/x", None), "p"),
        ProbeJob("out.json", run, "prepared.json"),
        CalibrateJob("out.json", "cpu", "jax", "pypi", CALIBRATE, jit_compile=True),
        DescribeJob("out.json", run.model, 32, 10),
        EnvironmentJob("out.json"),
        FitJob("out.json", run, "prepared.json", 2, 1536),
        ParityJob("out.json", (run, run), (0, 1), "prepared.json", 100),
    ]
    assert {type(j) for j in jobs} == set(JOB_KINDS.values())
    for job in jobs:
        data = _through_json(encode(job))
        assert data["kind"] == type(job).KIND
        assert decode_job(data) == job


def test_results_keep_their_nested_types():
    probe = ProbeResult(
        "tensorflow", "pypi", "cpu", "float32", 32, [ProbePoint(4, 1.0, [0.5], 0.5)]
    )
    assert decode(ProbeResult, _through_json(encode(probe))).points[0].step_s == 0.5
    arm = ArmResult(repeat=0, policy="float32", fingerprint={"host": "h"}, step_s=[0.1, 0.2],
                    rounds=[0, 1], process="p1")
    result = RepeatResult(process="p1", arms=[arm])
    assert decode(RepeatResult, _through_json(encode(result))) == result


def test_what_does_not_fit_is_named():
    data = encode(EnvironmentJob("out.json"))
    with pytest.raises(ContractError, match="EnvironmentJob: unknown field\\(s\\) colour"):
        decode_job(data | {"colour": "red"})
    with pytest.raises(ContractError, match="unknown engine job kind 'train'"):
        decode_job(data | {"kind": "train"})
    with pytest.raises(ContractError, match="ProbeJob: missing field\\(s\\) run"):
        decode_job({"kind": "probe", "out": "x", "prepared": "p"})
