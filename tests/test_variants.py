"""TensorFlow variants side by side, each in its own environment and with its own settings, in a
warm copy of the smoke run's checkout (a file of its own, so another worker runs it beside
test_workflow.py's runs)."""

import json

import pandas as pd
import pytest
from workflow_helpers import MACHINE, job_counts, snakemake, warm_copy

from mptbench.core import isa

pytestmark = [pytest.mark.slow, pytest.mark.workflow]


def test_variants_run_side_by_side_with_their_own_settings(tmp_path_factory, warm):
    """Each variant's cells in its own environment and settings: two instruction-set caps
    side by side, timed once each, with the step-time probe the default grid runs and without
    the synthetic twin (what is checked here is the variants', not the timing's). A capped
    cell's kernels stay within its cap, as oneDNN itself names them; what the cap cannot run
    is unsupported, in oneDNN's words, from its probe on: every job finishes. pypi and
    pypi_xla are planned (the dry run), not run: the smoke runs pypi, and
    tests/jobs/test_calibrate.py compiles pypi_xla's calibration."""
    smoke = warm_copy(warm, tmp_path_factory.mktemp("variants"))
    caps = ["isa_avx2", "isa_avx512_core"]
    if isa.lacks("AVX512_CORE", isa.cpu_flags()):  # a CPU without AVX-512: left out (below)
        caps = ["isa_avx", "isa_avx2"]
    overrides = f'overrides=["name=smoke_variants","variant=[{",".join(caps)}]",'
    overrides += '"policy=[float32,mixed_bfloat16]","sweep.batch_sizes=[8]","train.repeats=1",'
    overrides += '"train.max_repeats=1","train.profile_steps=0","sweep.fit_search=false",'
    overrides += '"train.synthetic_twin=false",'
    overrides += '"train.validation_steps=0"]'
    # TensorFlow-only variants pair with tensorflow alone, said once, not an error; a cap
    # above this machine is left out, said once too.
    dry = snakemake(smoke, "-n", "--config", "experiment=smoke_backends",
                    overrides.replace(",".join(caps), "pypi,pypi_xla,isa_avx2,isa_amx"))
    assert dry.returncode == 0, dry.stderr[-3000:]
    out = dry.stdout + dry.stderr
    assert out.count("variant pypi_xla runs on tensorflow only: no jax cells with it") == 1
    assert (out.count("variant isa_amx caps at AVX512_CORE_AMX, above this machine's CPU")
            == bool(isa.lacks("AVX512_CORE_AMX", isa.cpu_flags())))
    cells = {word.split(f"/runs/{MACHINE}/", 1)[1].split("/cpu/")[0]
             for word in out.replace(",", " ").split()
             if "/runs/" in word and word.endswith("bs8.json")}
    assert {c for c in cells if "isa_amx" not in c} == {
        f"{model}/{backend}/{variant}"
        for model, backends in (("seed_convnet", ("tensorflow", "jax")),
                                ("mobilenet_v2", ("tensorflow",)))
        for backend in backends
        for variant in ("pypi", "pypi_xla", "isa_avx2")
        if backend == "tensorflow" or variant != "pypi_xla"
    }
    done = snakemake(smoke, "--cores", "2", "--config", "experiment=smoke", overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert job_counts(out)["calibrate"] == 2  # one per cap: each its own peaks
    summary = pd.read_csv(smoke / "results/smoke_variants/report/summary.csv")
    assert sorted(set(summary["variant"])) == sorted(caps)
    by_cell = summary.set_index(["variant", "policy"])
    assert (by_cell["onednn"] == "on").loc[caps].all()  # a cap turns oneDNN on to take
    for cap in caps:
        for policy in ("float32", "mixed_bfloat16"):
            row = by_cell.loc[(cap, policy)]
            limit = GENERATIONS[cap]
            assert row["isa_cap"] == limit
            if (cap, policy) == ("isa_avx2", "mixed_bfloat16") and not isa.lacks(
                    "AVX512_CORE_BF16", isa.cpu_flags()):
                continue  # unsupported on a CPU with bfloat16 math, no kernel named: below
            # The test that fails when a cap does not take: oneDNN's own word for the kernels.
            assert isinstance(row["kernel_isa"], str) and not isa.above(row["kernel_isa"], limit)
            assert not row["kernel_above_cap"]
    record = json.loads(
        (smoke / f"results/smoke_variants/runs/{MACHINE}"
         / "seed_convnet/tensorflow/isa_avx2/cpu/float32/bs8.json").read_text())
    assert record["config"]["variant"]["isa"] == "AVX2"
    assert record["config"]["variant"]["installed"]["tensorflow"] == "2.21.0"
    page = (smoke / "results/smoke_variants/report/index.html").read_text()
    assert "TensorFlow variants" in page and "What the CPU's instructions buy" in page
    capped = by_cell.loc[("isa_avx2", "mixed_bfloat16")]
    assert by_cell.loc[("isa_avx2", "float32"), "outcome"] == "ok"
    calibrations = smoke / "results/calibration" / MACHINE / "tensorflow/isa_avx2/cpu"
    [calibration] = calibrations.glob("*.json")
    peaks = json.loads(calibration.read_text())["matmul"]
    assert peaks["float32"]["tflops"] > 0
    if isa.lacks("AVX512_CORE_BF16", isa.cpu_flags()):
        # TensorFlow gives oneDNN bfloat16 only on a CPU with bfloat16 math: elsewhere its own
        # kernels run it, whatever the cap, and no oneDNN kernel of the dtype is named.
        assert capped["outcome"] == "ok" and pd.isna(capped["kernel_isa_own"])
        assert peaks["bfloat16"]["tflops"] > 0
        return
    # On one that has it, no bfloat16 convolution below AVX-512: unsupported, in oneDNN's
    # words, and its peak too.
    assert capped["outcome"] == "unsupported", capped["reason"]
    assert capped["reason"].startswith("its probe: oneDNN: could not create a primitive "
                                       "descriptor for")
    assert peaks["bfloat16"]["unsupported"].startswith("oneDNN: could not create a primitive")


GENERATIONS = {"isa_avx": "AVX", "isa_avx2": "AVX2", "isa_avx512_core": "AVX512_CORE"}
