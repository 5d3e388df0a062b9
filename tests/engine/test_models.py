"""A cell's model under its policy: the layers a kept policy keeps in float32 compute in it."""

import numpy as np
import pytest
from workflow_helpers import composed

from mptbench.core.policies import Policy
from mptbench.engine.models import build_model
from mptbench.plan import model_config

pytestmark = pytest.mark.slow


def test_a_kept_policy_computes_its_kept_layers_in_float32_and_the_rest_in_its_dtype():
    name = "mixed_bfloat16_keep_Conv2D"
    cfg = composed("smoke", f"policy=[float32,{name}]")
    model = build_model(model_config(cfg, "seed_convnet"), (16, 16, 3), 10,
                        Policy.of(name, cfg["policy"][name]))
    dtypes = {}
    for layer in model.layers:
        dtypes.setdefault(type(layer).__name__, set()).add(layer.compute_dtype)
    assert dtypes["Conv2D"] == {"float32"}
    assert dtypes["BatchNormalization"] == dtypes["Dense"] == {"bfloat16"}
    assert all(w.dtype == "float32" for w in model.weights)  # variables stay float32
    history = model.fit(np.random.rand(8, 16, 16, 3).astype("float32"), np.zeros(8), verbose=0)
    assert np.isfinite(history.history["loss"][0])
