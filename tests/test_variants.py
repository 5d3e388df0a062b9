"""TensorFlow variants side by side, each in its own environment and with its own settings, in a
warm copy of the smoke run's checkout (a file of its own, so another worker runs it beside
test_workflow.py's runs)."""

import json

import pandas as pd
import pytest
from workflow_helpers import MACHINE, job_counts, snakemake, warm_copy

pytestmark = [pytest.mark.slow, pytest.mark.workflow]


def test_variants_run_side_by_side_with_their_own_settings(tmp_path_factory, warm):
    """Each variant's cells in its own environment and settings; timed once each, without the
    step-time probe and the synthetic twin (what is checked here is the variants', not the
    timing's)."""
    smoke = warm_copy(warm, tmp_path_factory.mktemp("variants"))
    overrides = 'overrides=["name=smoke_variants","variant=[pypi,pypi_onednn,pypi_xla]",'
    overrides += '"policy=[float32]","sweep.batch_sizes=[8]","train.repeats=1",'
    overrides += '"train.max_repeats=1","train.profile_steps=0","sweep.fit_search=false",'
    overrides += '"train.max_step_seconds=null","train.synthetic_twin=false",'
    overrides += '"train.validation_steps=0"]'
    # TensorFlow-only variants pair with tensorflow alone, said once, not an error.
    dry = snakemake(smoke, "-n", "--config", "experiment=smoke_backends", overrides)
    assert dry.returncode == 0, dry.stderr[-3000:]
    out = dry.stdout + dry.stderr
    assert out.count("variant pypi_onednn runs on tensorflow only: no jax cells with it") == 1
    cells = {word.split(f"/runs/{MACHINE}/", 1)[1].split("/cpu/")[0]
             for word in out.replace(",", " ").split()
             if "/runs/" in word and word.endswith("bs8.json")}
    assert cells == {
        "seed_convnet/jax/pypi", "seed_convnet/tensorflow/pypi",
        "seed_convnet/tensorflow/pypi_onednn", "seed_convnet/tensorflow/pypi_xla",
        "mobilenet_v2/tensorflow/pypi", "mobilenet_v2/tensorflow/pypi_onednn",
        "mobilenet_v2/tensorflow/pypi_xla",
    }
    done = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke", overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    # pypi's calibration (same settings as smoke's) is reused; only the new variants calibrate.
    assert job_counts(out)["calibrate"] == 2
    summary = pd.read_csv(smoke / "results/smoke_variants/report/summary.csv")
    assert sorted(summary["variant"]) == ["pypi", "pypi_onednn", "pypi_xla"]
    summary = summary[summary["backend"] == "tensorflow"]
    assert set(summary["outcome"]) == {"ok"} and (summary["ms_per_step"] > 0).all()
    by_variant = summary.set_index("variant")
    assert bool(by_variant.loc["pypi_xla", "xla"]) and not bool(by_variant.loc["pypi", "xla"])
    assert by_variant["onednn"].notna().all()
    record = json.loads(
        (
            smoke
            / f"results/smoke_variants/runs/{MACHINE}"
            / "seed_convnet/tensorflow/pypi_onednn/cpu/float32/bs8.json"
        ).read_text()
    )
    assert record["config"]["variant"]["env"] == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert record["config"]["variant"]["installed"]["tensorflow"] == "2.21.0"
    assert "TensorFlow variants" in (smoke / "results/smoke_variants/report/index.html").read_text()
