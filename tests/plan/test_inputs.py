"""The files a job waits for: a group's probes and fits searches, a cell's probe, its model's
description, a build's wheels; and what the report is made of."""

import pytest
from smoke_plan import GROUP, smoke_plan

from mptbench.plan import inputs

CELL = "box/seed_convnet/tensorflow/pypi/cpu"
smoke = smoke_plan

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")  # the smoke's


@pytest.fixture(scope="module")
def cfg():
    return smoke()[0]


def test_a_train_job_waits_for_each_policys_probe_and_fits_search(cfg):
    train_job = {**GROUP, "batch_size": "8"}
    assert inputs.group_probes(cfg, train_job) == [
        f"results/smoke/probes/{CELL}/{policy}.json" for policy in POLICIES
    ]
    assert inputs.group_fits(cfg, train_job) == [
        f"results/smoke/fits/{CELL}/{policy}.json" for policy in POLICIES
    ]
    assert inputs.cell_probe(cfg, {**GROUP, "policy": "float32"}) == [
        f"results/smoke/probes/{CELL}/float32.json"
    ]


def test_without_a_step_limit_or_fits_search_nothing_is_waited_for():
    cfg, _ = smoke("train.max_step_seconds=null", "sweep.fit_search=false")
    train_job = {**GROUP, "batch_size": "8"}
    assert inputs.group_probes(cfg, train_job) == []
    assert inputs.group_fits(cfg, train_job) == []
    assert inputs.cell_probe(cfg, {**GROUP, "policy": "float32"}) == []


def test_a_models_description_is_per_model_config_and_image_size(cfg):
    path = inputs.model_info(cfg, {"model": "seed_convnet"})
    assert path.startswith("results/models/seed_convnet/") and path.endswith(".json")
    larger, _ = smoke("dataset.image_size=64")
    assert inputs.model_info(larger, {"model": "seed_convnet"}) != path
    # The smoke's config gives its data's shape: the description waits for no cache.
    assert inputs.model_info_data(cfg) == []


def test_a_description_of_a_folders_model_waits_for_its_cache():
    folder = {"name": "image-folder", "builder": "image_folder", "image_size": 32,
              "num_classes": None}
    assert inputs.model_info_data({"dataset": folder}) == ["resources/tfds/image-folder-32px.json"]


def test_only_a_variant_built_here_waits_for_the_build(cfg):
    assert inputs.built_wheels(cfg, {"variant": "pypi"}) == []
    built, _ = smoke("variant=[source_avx2_fma]")
    assert inputs.built_wheels(built, {"variant": "source_avx2_fma"}) == (
        "resources/wheels/source_avx2_fma"
    )
    given, _ = smoke("variant=[source_avx2_fma]", "variant.source_avx2_fma.wheel=/w/tf.whl")
    assert inputs.built_wheels(given, {"variant": "source_avx2_fma"}) == []


def test_only_local_sources_are_inputs():
    sources = ("https://host/a.tgz", "resources/a.tgz", "file:///data/a.tgz", None, "")
    assert inputs.local_inputs(*sources) == ["resources/a.tgz"]


def test_the_report_waits_for_every_record_fits_search_and_parity_run():
    cfg, cells = smoke()
    assert inputs.records(cfg, cells) == [
        f"results/smoke/runs/{CELL}/{policy}/bs{batch}.json"
        for policy in POLICIES
        for batch in (4, 8)
    ]
    reported = inputs.reported(cfg, cells)
    assert reported["fits"] == [
        f"results/smoke/fits/{CELL}/{policy}.json" for policy in sorted(POLICIES)
    ]
    assert reported["parity"] == [
        f"results/smoke/parity/{CELL}/bs4.json",
        f"results/smoke/parity/{CELL}/bs8.json",
    ]


@pytest.mark.parametrize(
    "overrides",
    [
        ["train.parity_steps=0"],
        ["policy=[float32]"],
        ["policy.float32.baseline=false"],
    ],
    ids=["no steps", "one policy", "no baseline"],
)
def test_no_parity_run_without_steps_or_a_baseline_to_compare_with(overrides):
    cfg, cells = smoke(*overrides)
    assert inputs.reported(cfg, cells)["parity"] == []


def test_no_fits_search_in_the_report_when_it_is_off():
    cfg, cells = smoke("sweep.fit_search=false")
    reported = inputs.reported(cfg, cells)
    assert reported["fits"] == [] and reported["parity"]
