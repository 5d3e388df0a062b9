"""Composition, checking and grid expansion of the Hydra configuration."""

import os
from pathlib import Path

import pytest

from mptbench.core.contract import encode
from mptbench.core.policies import Policy
from mptbench.plan import (
    Cell,
    ConfigError,
    check_workflow_config,
    compose_config,
    expand_devices,
    grid,
    left_out,
    machines,
    pairs,
    params,
    parse_overrides,
    run_config,
    workflow_overrides,
)

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_default_is_the_published_experiment():
    cfg = compose_config(CONF)
    assert cfg["name"] == "benchmark"
    assert cfg["dataset"]["name"] == "imagenette2-320"
    assert cfg["dataset"]["image_size"] == 256
    assert (
        cfg["dataset"]["sha256"]
        == "569b4497c98db6dd29f335d1f109cf315fe127053cedf69010d047f0188e158c"
    )
    assert list(cfg["policy"]) == ["float32", "mixed_float16", "mixed_bfloat16"]
    assert cfg["sweep"]["batch_sizes"] == [32, 64, 128, 256, 512]
    assert list(cfg["model"]) == ["seed_convnet"]
    convnet = cfg["model"]["seed_convnet"]
    assert [c["filters"] for c in convnet["conv_layers"]] == [32, 64, 128]
    assert [c["kernel_size"] for c in convnet["conv_layers"]] == [5, 7, 11]


def test_default_grid_covers_every_device_policy_and_batch_size():
    cfg = compose_config(CONF)
    cells = grid(cfg, expand_devices(cfg, gpus=["NVIDIA H200", "Tesla V100"]), ["box"])
    assert len(cells) == 3 * 3 * 5
    assert {c.device for c in cells} == {"cpu", "gpu0", "gpu1"}
    cell = Cell("box", "seed_convnet", "tensorflow", "pypi", "gpu1", "mixed_bfloat16", 512)
    assert cell in cells
    assert cell.label == "box/seed_convnet/tensorflow/pypi/gpu1/mixed_bfloat16/bs512"


def test_the_machine_axis_is_this_machines_hardware_a_name_or_the_targets(monkeypatch):
    monkeypatch.setenv("MPTBENCH_TEST_CPU_NAME", "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz")
    cfg = compose_config(CONF, "smoke")
    assert machines(cfg) == [f"intel-xeon-gold-6248-{os.cpu_count()}c"]
    named = compose_config(CONF, "smoke", ["sweep.machine=laptop-b"])
    assert machines(named) == ["laptop-b"]
    targets = compose_config(
        CONF, "smoke", ["sweep.targets={v100: {constraint: v100}, a100: {constraint: a100}}"]
    )
    assert machines(targets) == ["v100", "a100"]
    assert {c.machine for c in grid(targets, ["cpu"])} == {"v100", "a100"}
    uneven = compose_config(
        CONF, "smoke", ["sweep.targets={v100: {constraint: v100}, a100: {gres: 'gpu:a100:1'}}"]
    )
    with pytest.raises(ConfigError, match=r"every target names the same resources \(v100: "):
        machines(uneven)
    elsewhere = compose_config(CONF, "smoke", ["device.check_present=false"])
    with pytest.raises(ConfigError, match="sweep.machine: auto names this machine's hardware"):
        machines(elsewhere)
    with pytest.raises(ConfigError, match="sweep.machine"):
        compose_config(CONF, "smoke", ["sweep.machine=Laptop B"])


def test_smoke_experiment_is_small_and_offline():
    cfg = compose_config(CONF, "smoke")
    cells = grid(cfg, expand_devices(cfg, gpus=[]))
    assert len(cells) == 6  # one model on one backend x 3 policies x 2 batch sizes
    assert {(c.model, c.backend) for c in cells} == {("seed_convnet", "tensorflow")}
    # float32, what a CPU with AVX512_BF16 or AMX runs fast, and the 2020 experiment's policy.
    assert {c.policy for c in cells} == {"float32", "mixed_bfloat16", "mixed_float16"}
    assert {c.device for c in cells} == {"cpu"}
    assert not cfg["dataset"]["url"].startswith("http")


def test_smoke_backends_adds_a_model_and_a_backend_to_the_smoke():
    cfg = compose_config(CONF, "smoke_backends")
    cells = grid(cfg, expand_devices(cfg, gpus=[]))
    # The seed convnet on two backends, MobileNetV2 on TensorFlow; 2 policies x 1 batch size.
    assert len(cells) == 6
    assert {(c.model, c.backend) for c in cells} == {
        ("seed_convnet", "tensorflow"), ("seed_convnet", "jax"), ("mobilenet_v2", "tensorflow")
    }
    # The smoke's archive, at the 32 px MobileNetV2 takes (the smoke's own is smaller).
    assert cfg["dataset"] == {**compose_config(CONF, "smoke")["dataset"], "image_size": 32}


@pytest.mark.parametrize(
    "overrides",
    [
        ["sweep.batch_sizes=[32,64]", "dataset.image_size=128"],
        "[sweep.batch_sizes=[32,64],dataset.image_size=128]",
    ],
)
def test_overrides_as_list_or_unquoted_string(overrides):
    cfg = compose_config(CONF, None, overrides)
    assert cfg["sweep"]["batch_sizes"] == [32, 64]
    assert cfg["dataset"]["image_size"] == 128


def test_parse_overrides_keeps_brackets_and_quotes_together():
    assert parse_overrides("[a=[1,2],b='x,y',c={d:1,e:2}]") == ["a=[1,2]", "b='x,y'", "c={d:1,e:2}"]
    assert parse_overrides(None) == []
    assert parse_overrides(["x=1"]) == ["x=1"]


def test_policy_subset_by_override():
    cfg = compose_config(CONF, None, ["policy=[float32,mixed_bfloat16]"])
    assert list(cfg["policy"]) == ["float32", "mixed_bfloat16"]


@pytest.mark.parametrize(
    ("experiment", "overrides", "message"),
    [
        (
            "nope",
            None,
            "unknown experiment 'nope' (allowed: benchmark, cifar_notebook, cpu_generations, "
            "seed_blog, smoke, "
            "smoke_backends)",
        ),
        (
            None,
            ["policy=[float32,fp8]"],
            "unknown policy 'fp8' (allowed: float32, mixed_bfloat16, mixed_float16)",
        ),
        (None, ["sweep.batch_sizes=[0,32]"], "sweep.batch_sizes[0]: 0 is not an integer >= 1"),
        (None, ["sweep.batch_sizes=[-8]"], "sweep.batch_sizes[0]: -8 is not an integer >= 1"),
        (None, ["train.foo=1"], "override of unknown key 'train.foo'"),
        (
            None,
            ["sweep.devices=[tpu]"],
            "sweep.devices[0]: 'tpu' is not a device (allowed: auto, cpu, gpu0, gpu1, ...)",
        ),
        (None, ["+train.epochz=3"], "train: unknown key 'epochz' (allowed: epochs, "),
        (None, ["+dataset.input.cach=none"], "dataset.input: unknown key 'cach'"),
        (None, ["train.time_budget_s=0"], "train.time_budget_s: 0 is not a positive number"),
        (None, ["sweep.batch_sizes=[4,4]"], "sweep.batch_sizes: lists a batch size twice"),
        (None, ["sweep.batch_sizes=[]"], "sweep.batch_sizes: empty; give at least one"),
        (None, ["sweep.batch_sizes=[four]"], "sweep.batch_sizes[0]: 'four' is not an integer"),
        (None, ["policy=[]"], "policy: no policy selected"),
        (None, ["train.verbose=5"], "train.verbose: 5 (allowed: 0, 1, 2)"),
        (None, ["name=a/b"], "name: 'a/b' must be letters, digits"),
        (
            None,
            ["policy.mixed_float16.variable_dtype=bfloat16"],
            "policy.mixed_float16: variable_dtype 'bfloat16' with compute_dtype 'float16'",
        ),
        (None, ["dataset.sha256=abc"], "dataset.sha256: 'abc' is not 64 lowercase hex digits"),
        (None, ["train.timed_steps=2", "train.min_timed_steps=5"], "train.timed_steps: 2 is below"),
        (None, ["dataset.input.cache=disk"], "dataset.input.cache: 'disk' (allowed: memory, none)"),
        (
            None,
            ["sweep.max_batch=16"],
            "sweep.max_batch: 16 is below the grid's smallest batch size (32)",
        ),
        (None, ["device.cpu.fits_search_mb=10"], "device.cpu.fits_search_mb: 10 is a memory"),
        (None, ["train.synthetic_twin=sometimes"], "train.synthetic_twin: 'sometimes' is true"),
        # The two memory limits' old name, in an override and in a yaml (+: a key it adds).
        (None, ["train.memory_limit_mb=512"], "renamed train.kill_above_mb (the trainer is"),
        (None, ["device.cpu.memory_limit_mb=512"], "renamed device.<kind>.fits_search_mb (the"),
        (None, ["+train.memory_limit_mb=512"], "train: 'memory_limit_mb' is renamed: train.kill"),
    ],
)
def test_bad_input_is_one_clear_line(experiment, overrides, message):
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, experiment, overrides)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_memory_limit_larger_than_the_device_is_one_line_before_any_job():
    limit = ["sweep.devices=[cpu]", "device.cpu.fits_search_mb=99999999"]
    cfg = compose_config(CONF, None, limit)
    with pytest.raises(ConfigError, match="fits_search_mb: 99999999 MB is more than cpu"):
        expand_devices(cfg, gpus=[])
    limit = ["sweep.devices=[cpu,gpu0]", "device.gpu.fits_search_mb=4096"]
    cfg = compose_config(CONF, None, limit)
    assert expand_devices(cfg, gpus=["NVIDIA H200"]) == ["cpu", "gpu0"]  # no nvidia-smi: unknown


def test_settings_no_timing_run_depends_on_rerun_no_group():
    cell = Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", "float32", 32)
    runs = [
        encode(run_config(compose_config(CONF, None, overrides), cell))
        for overrides in ([], ["device.cpu.fits_search_mb=4096", "train.parity_steps=7"])
    ]
    assert runs[0] == runs[1]


def test_absent_gpu_is_rejected_unless_check_disabled():
    cfg = compose_config(CONF, None, ["sweep.devices=[cpu,gpu0]"])
    with pytest.raises(ConfigError, match="gpu0 was asked for but is not visible here"):
        expand_devices(cfg, gpus=[])
    assert expand_devices(cfg, gpus=["NVIDIA H200"]) == ["cpu", "gpu0"]
    cfg = compose_config(CONF, None, ["sweep.devices=[cpu,gpu0]", "device.check_present=false"])
    assert expand_devices(cfg, gpus=[]) == ["cpu", "gpu0"]


def test_run_config_holds_only_its_own_cell():
    cfg = compose_config(CONF)
    cell = Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", "mixed_float16", 64)
    run = run_config(cfg, cell)
    assert run.cell == cell
    assert run.policy == Policy("mixed_float16", "float16", "float32", "dynamic", baseline=False)
    assert run.device.kind == "cpu" and run.device.block_steps == 1
    assert run.model.conv_layers[0].filters == 32 and not run.model.one_hot_labels
    assert "sweep" not in encode(run)
    # Adding a batch size to the sweep leaves existing cells' settings unchanged.
    wider = compose_config(CONF, None, ["sweep.batch_sizes=[32,64,1024]"])
    cell = Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", "mixed_float16", 64)
    assert run_config(wider, cell) == run
    # ... and so does adding a backend.
    jax_too = compose_config(CONF, None, ["backend=[tensorflow,jax]"])
    assert run_config(jax_too, cell) == run


def test_tensorflow_only_variants_pair_with_tensorflow_alone_and_say_so():
    cfg = compose_config(CONF, None, ["backend=[tensorflow,jax]", "variant=[pypi,pypi_xla]"])
    assert pairs(cfg) == [("tensorflow", "pypi"), ("tensorflow", "pypi_xla"), ("jax", "pypi")]
    assert left_out(cfg) == ["variant pypi_xla runs on tensorflow only: no jax cells with it"]
    cells = grid(cfg, ["cpu"], ["box"])
    assert len(cells) == 3 * 3 * 5
    jax_cell = Cell("box", "seed_convnet", "jax", "pypi", "cpu", "mixed_bfloat16", 32)
    assert jax_cell in cells
    run = run_config(cfg, jax_cell)
    assert run.backend.name == "jax" and run.cell.backend == "jax"


def test_a_cap_above_the_machine_is_left_out_with_one_line_and_its_run_carries_the_cap(
    monkeypatch,
):
    """On a CPU without AVX-512, isa_avx512_core would cap nothing: left out, said once; an
    experiment of such caps alone stops with the same words."""
    from mptbench.core import isa

    monkeypatch.setattr(isa, "cpu_flags", lambda cpuinfo="/proc/cpuinfo": {"avx", "avx2", "fma"})
    cfg = compose_config(CONF, None, ["variant=[pypi,isa_avx2,isa_avx512_core]"])
    assert pairs(cfg) == [("tensorflow", "pypi"), ("tensorflow", "isa_avx2")]
    assert left_out(cfg) == [
        "variant isa_avx512_core caps at AVX512_CORE, above this machine's CPU (it lacks "
        "avx512f, avx512bw, avx512vl, avx512dq): no cells with it"
    ]
    run = run_config(cfg, Cell("box", "seed_convnet", "tensorflow", "isa_avx2", "cpu",
                               "float32", 32))
    assert run.variant.environment("tensorflow") == {
        "ONEDNN_MAX_CPU_ISA": "AVX2", "TF_ENABLE_ONEDNN_OPTS": "1"}
    with pytest.raises(ConfigError, match="^variant isa_avx512_core caps at AVX512_CORE, above"):
        compose_config(CONF, None, ["variant=[isa_avx512_core]"])


def test_a_model_runs_on_the_backends_it_lists_and_its_runs_never_see_the_list():
    both = ["backend=[tensorflow,jax]", "model=[seed_convnet,mobilenet_v2]",
            "dataset.image_size=32"]
    plain = compose_config(CONF, None, both)
    cfg = compose_config(CONF, None, [*both, "+model.mobilenet_v2.backends=[tensorflow]"])
    assert left_out(cfg) == ["model mobilenet_v2 runs on tensorflow only: no jax cells with it"]
    cells = grid(cfg, ["cpu"], ["box"])
    assert {(c.model, c.backend) for c in cells} == {
        ("seed_convnet", "tensorflow"), ("seed_convnet", "jax"), ("mobilenet_v2", "tensorflow")
    }
    assert len(cells) == 3 * 3 * 5
    # Listing backends changes no run of the model and not its description.
    cell = Cell("box", "mobilenet_v2", "tensorflow", "pypi", "cpu", "float32", 32)
    assert run_config(cfg, cell) == run_config(plain, cell)
    assert "backends" not in encode(run_config(cfg, cell))["model"]
    assert params.description(cfg, "mobilenet_v2") == params.description(plain, "mobilenet_v2")
    # A model on none of the backends asked for would have no cells: one line before any job.
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, None, ["+model.seed_convnet.backends=[jax]"])
    assert str(info.value) == (
        "model.seed_convnet.backends: jax, none of the backends asked for with a variant "
        "(tensorflow): no cells"
    )
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, None, ["+model.seed_convnet.backends=[tensorflw]"])
    assert "model.seed_convnet.backends" in str(info.value) and "tensorflow" in str(info.value)
    # Without the + Hydra knows no such key; the line says how to add it.
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, None, ["model.seed_convnet.backends=[tensorflow]"])
    assert str(info.value) == (
        "override of 'model.seed_convnet.backends': a setting its yaml leaves out; add it with a "
        "leading + (+model.seed_convnet.backends=...)"
    )


def test_a_misspelt_backend_is_named_with_the_allowed_ones():
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, None, ["backend=[jaxx]"])
    assert "jaxx" in str(info.value) and "jax" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("experiment", "model", "dataset", "epochs"),
    [
        ("seed_blog", ["seed_convnet"], "imagenette2-320", 20),
        ("cifar_notebook", ["cifar_mlp"], "cifar10", 50),
    ],
)
def test_published_experiments_carry_their_model_dataset_and_epochs(
    experiment, model, dataset, epochs
):
    cfg = compose_config(CONF, experiment)
    assert (list(cfg["model"]), cfg["dataset"]["name"], cfg["train"]["epochs"]) == (
        model,
        dataset,
        epochs,
    )
    assert list(cfg["policy"]) == ["float32", "mixed_float16"]
    assert cfg["train"]["warmup_epochs"] == 1 and cfg["train"]["validate"]


def test_tracking_server_needs_its_uri(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(ConfigError, match="MLFLOW_TRACKING_URI is not set"):
        compose_config(CONF, None, ["tracking=server"])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    cfg = compose_config(CONF, None, ["tracking=server"])
    assert cfg["tracking"]["uri"] == "http://127.0.0.1:5000"
    assert cfg["tracking"]["env"] == ["MLFLOW_TRACKING_URI"]


def test_a_misspelt_workflow_key_is_named_with_the_allowed_ones():
    check_workflow_config({"experiment": "smoke", "overrides": [], "policy": ["float32"]})
    with pytest.raises(ConfigError) as info:
        check_workflow_config({"experiement": "smoke"})
    assert str(info.value) == (
        "--config experiement=...: unknown key 'experiement' (allowed: experiment, overrides, "
        "name, seed, dataset, model, backend, policy, variant, device, sweep, train, tracking, "
        "report)"
    )


def test_config_keys_as_people_type_them_become_overrides():
    """What Snakemake's --config parser hands over for `policy=[float32,mixed_bfloat16]
    model=resnet50 sweep="{batch_sizes: [32, 64]}" seed=3` (YAML's BaseLoader: strings)."""
    config = {
        "experiment": "smoke",
        "policy": ["float32", "mixed_bfloat16"],
        "model": "resnet50",
        "sweep": {"batch_sizes": ["32", "64"]},
        "seed": 3,
        "dataset": {"input": {"cache": "none"}, "image_size": "32"},  # resnet50's least
        "variant": {"pypi": {"description": "PyPI's, as is"}},
        "overrides": ["train.repeats=1"],
    }
    assert workflow_overrides(config) == [
        "policy=[float32,mixed_bfloat16]",
        "model=resnet50",
        "sweep.batch_sizes=[32,64]",
        "seed=3",
        "dataset.input.cache=none",
        "dataset.image_size=32",
        "variant.pypi.description='PyPI\\'s, as is'",
        "train.repeats=1",
    ]
    cfg = compose_config(CONF, "smoke", workflow_overrides(config))
    assert list(cfg["policy"]) == ["float32", "mixed_bfloat16"] and list(cfg["model"]) == [
        "resnet50"
    ]
    assert cfg["sweep"]["batch_sizes"] == [32, 64] and cfg["seed"] == 3
    assert cfg["variant"]["pypi"]["description"] == "PyPI's, as is"
    assert cfg["dataset"]["input"]["cache"] == "none" and cfg["train"]["repeats"] == 1


def test_a_misspelt_nested_key_given_plainly_is_named():
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, "smoke", workflow_overrides({"sweep": {"batch_size": ["8"]}}))
    assert str(info.value) == (
        "override of unknown key 'sweep.batch_size': no such key in the config"
    )


def test_two_baselines_are_refused_and_another_name_can_be_the_baseline():
    with pytest.raises(ConfigError, match="float32, fp32 each say baseline: true"):
        compose_config(
            CONF,
            "smoke",
            [
                "+policy.fp32={compute_dtype:float32,"
                "variable_dtype:float32,loss_scaling:none,baseline:true}"
            ],
        )
    renamed = compose_config(CONF, "smoke", [
        "policy.float32.baseline=false",
        "+policy.fp32={compute_dtype:float32,variable_dtype:float32,loss_scaling:none,"
        "baseline:true}",
    ])
    cell = Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", "fp32", 8)
    assert run_config(renamed, cell).policy.baseline


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["sweep.batch_sizes=[4,8"], "sweep.batch_sizes=[4,8"),
        ("[policy=[float32,mixed_float16]", "policy=[float32,mixed_float16"),
        (["dataset.image_size=32", "model=[seed_convnet"], "model=[seed_convnet"),
    ],
)
def test_an_override_that_does_not_parse_is_named(overrides, named):
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, "smoke", overrides)
    message = str(info.value)
    assert message.startswith(f"override '{named}' does not parse: ") and "\n" not in message


def test_an_image_size_a_model_cannot_take_stops_before_any_job():
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, "smoke_backends", ["dataset.image_size=16"])
    assert str(info.value) == (
        "dataset.image_size=16: model mobilenet_v2 (keras.applications.MobileNetV2) takes "
        "images of at least 32 px"
    )
    compose_config(CONF, "smoke", ["dataset.image_size=16", "model=[seed_convnet]"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("sweep.batch_sizes=[0]", "sweep.batch_sizes[0]: 0 is not an integer >= 1"),
        ("sweep.batch_sizes=[four]", "sweep.batch_sizes[0]: 'four' is not an integer >= 1"),
        ("dataset.sha256=abc123", "dataset.sha256: 'abc123' is not 64 lowercase hex digits"),
        ("variant=[pypy]", "unknown variant 'pypy' (allowed: eigen, isa_amx, isa_avx, "),
        ("policy=[mixed_flaot16]", "unknown policy 'mixed_flaot16' (allowed: "),
    ],
)
def test_bad_values_get_one_line_naming_them(override, message):
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, "smoke", [override])
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_kept_policy_is_made_from_its_policys_yaml_and_reaches_its_runs():
    """mixed_bfloat16_keep_DepthwiseConv2D: no yaml of its own; its cells' runs carry the
    layers it keeps in float32, and it is no baseline."""
    name = "mixed_bfloat16_keep_DepthwiseConv2D"
    cfg = compose_config(CONF, "smoke", [f"policy=[float32,mixed_bfloat16,{name}]"])
    assert cfg["policy"][name] == cfg["policy"]["mixed_bfloat16"] | {
        "baseline": False, "float32_layers": ["DepthwiseConv2D"]}
    cell = next(c for c in grid(cfg, expand_devices(cfg)) if c.policy == name)
    policy = run_config(cfg, cell).policy
    assert policy.float32_layers == ("DepthwiseConv2D",) and not policy.baseline
    with pytest.raises(ConfigError, match="no policy mixed_int8 .* to keep layers of"):
        compose_config(CONF, "smoke", ["policy=[float32,mixed_int8_keep_Dense]"])
