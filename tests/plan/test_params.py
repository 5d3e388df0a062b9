"""What a job is given besides its files: the model, variant and backend it names, the fits
search's and parity's settings, the build's."""

from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.plan import ConfigError, layout, params


def smoke(*overrides):
    return composed("smoke", "sweep.machine=box", *overrides)


@pytest.fixture(scope="module")
def cfg():
    return smoke()


def test_a_model_description_of_this_experiment_gets_the_models_config(cfg):
    path = layout.model_info("seed_convnet", cfg["model"]["seed_convnet"], cfg["dataset"])
    key = Path(path).stem
    model = params.model(cfg, {"model": "seed_convnet", "key": key})
    assert model["name"] == "seed_convnet"
    assert model["conv_layers"] == cfg["model"]["seed_convnet"]["conv_layers"]


def test_a_description_named_for_other_data_is_not_this_experiments(cfg):
    with pytest.raises(ConfigError, match="000000000000.json: not a model of this experiment"):
        params.model(cfg, {"model": "seed_convnet", "key": "000000000000"})
    with pytest.raises(ConfigError, match="not a model of this experiment"):
        params.model(cfg, {"model": "resnet50", "key": "000000000000"})


def test_a_variant_or_backend_not_in_the_experiment_is_named(cfg):
    assert params.variant(cfg, {"variant": "pypi"})["name"] == "pypi"
    assert params.backend(cfg, {"backend": "tensorflow"}) == "tensorflow"
    with pytest.raises(ConfigError, match="variant pypi_xla is not in this experiment"):
        params.variant(cfg, {"variant": "pypi_xla"})
    with pytest.raises(ConfigError, match="backend jax is not in this experiment"):
        params.backend(cfg, {"backend": "jax"})


def test_the_fits_search_stops_at_the_grids_largest_batch_unless_given_a_cap(cfg):
    assert params.fit_settings(cfg, {"device": "cpu"}) == {
        "batch_sizes": [4, 8],
        "cap": 8,
        "steps": 2,
        "limit_mb": None,
    }
    capped = smoke("sweep.max_batch=64", "sweep.fit_steps=3", "device.gpu.fits_search_mb=4096")
    settings = params.fit_settings(capped, {"device": "gpu0"})
    assert (settings["cap"], settings["steps"], settings["limit_mb"]) == (64, 3, 4096)
    assert params.fit_settings(capped, {"device": "cpu"})["limit_mb"] is None


def test_parity_runs_the_configured_steps_within_its_budget():
    cfg = smoke("train.parity_steps=20", "train.parity_budget_s=5")
    assert params.parity_settings(cfg) == {"steps": 20, "budget_s": 5}


def test_a_source_build_gets_its_variants_settings_each_flag_quoted():
    cfg = smoke("variant=[source_avx2_fma]", "variant.source_avx2_fma.build.copts=[-mavx2,-O3]")
    job = {"variant": "source_avx2_fma"}
    build = cfg["variant"]["source_avx2_fma"]["build"]
    assert params.build_setting(cfg, "tag", job) == build["tag"]
    assert params.build_setting(cfg, "threads", job) == 16
    assert params.build_copts(cfg, job) == "--copt=-mavx2 --copt=-O3"
    with pytest.raises(ConfigError, match="variant.pypi.build is null"):
        params.build_setting(smoke(), "threads", {"variant": "pypi"})


def test_a_rules_folder_is_its_first_outputs():
    assert params.output_dir({}, ["resources/tfds/x.json", "other/y"]) == "resources/tfds"
