"""The networks a cell can train: the published layers, keras.applications, a user's builder."""

import shutil
from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.core.contract import ModelConfig
from mptbench.engine.networks import ModelError, builder_source, make_network
from mptbench.plan import model_config

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _model(name: str, *overrides: str) -> ModelConfig:
    cfg = composed(None, f"model=[{name}]", *overrides)
    return model_config(cfg, name)


def test_an_application_ends_in_a_float32_softmax_under_mixed_precision():
    import keras

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        network = make_network(_model("mobilenet_v2"), (32, 32, 3), 10, "mixed_float16")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert network.output.shape[-1] == 10
    assert network.layers[-1].dtype_policy.compute_dtype == "float32"
    assert network.layers[-2].dtype_policy.name == "mixed_float16"


def test_an_image_too_small_for_an_architecture_is_one_line():
    with pytest.raises(ModelError) as info:
        make_network(_model("resnet50"), (16, 16, 3), 10, "float32")
    assert str(info.value).startswith("model resnet50 at (16, 16, 3): ")
    assert "\n" not in str(info.value)


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    """The README's example and three broken builders, in the working directory."""
    shutil.copy(ROOT / "examples/mymodels.py", tmp_path / "mymodels.py")
    (tmp_path / "broken.py").write_text(
        "def raises(shape, classes, policy):\n    raise ValueError('no such layer: Conv9D')\n"
        "def not_a_model(shape, classes, policy):\n    return {'layers': []}\n"
    )
    (tmp_path / "unimportable.py").write_text("import no_such_package_anywhere\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_users_builder_from_the_working_directory(user_models):
    model = _model("python", "model.python.builder=mymodels:small_cnn")
    network = make_network(model, (32, 32, 3), 10, "float32")
    assert network.name == "small_cnn" and network.output.shape[-1] == 10
    source = builder_source("mymodels:small_cnn")
    assert (
        Path(source["builder_file"]).name == "mymodels.py" and len(source["builder_sha256"]) == 64
    )


@pytest.mark.parametrize(
    ("builder", "message"),
    [
        ("broken:raises", "model.builder broken:raises raised ValueError: no such layer: Conv9D"),
        ("broken:not_a_model", "model.builder broken:not_a_model returned dict, not a keras.Model"),
        ("broken:missing", "model.builder broken:missing: broken has no function missing"),
        ("unimportable:f", "model.builder unimportable:f: cannot import unimportable: No module"),
    ],
)
def test_a_builder_that_fails_is_one_line_naming_it(user_models, builder, message):
    with pytest.raises(ModelError) as info:
        make_network(
            _model("python", f"model.python.builder={builder}"), (32, 32, 3), 10, "float32"
        )
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
