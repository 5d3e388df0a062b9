"""The lines that reproduce the answer's choice in a user's own code: pasted above a model of
one's own, they run, and Keras then trains with the chosen policy, batch and float32 layers."""

import json
import subprocess
import sys

from answer_cases import FLOAT32_MS, cell, summary_of

from mptbench.report.answer import answers
from mptbench.report.breakdown import breakdown_table
from mptbench.report.headline import headline_lines
from mptbench.report.html import render_html
from mptbench.report.published import load_published

KEPT = "mixed_float16_keep_DepthwiseConv2D"
KEPT_FACTS = {"compute_dtype": "float16", "keras_policy": "mixed_float16",
              "float32_layers": "DepthwiseConv2D", "loss_scaling": "dynamic"}

# A user's model and fit after the pasted lines: it reports what Keras trained with.
USER_CODE = """
import json
import numpy as np


def build_model():
    inputs = keras.Input((12, 12, 3))
    x = keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = keras.layers.DepthwiseConv2D(3, name="depthwise")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    x = keras.layers.Dense(3, name="dense")(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="out")(x)
    return keras.Model(inputs, outputs)


model = {build}
model.compile("sgd", "sparse_categorical_crossentropy")
x = np.random.rand(BATCH_SIZE, 12, 12, 3).astype("float32")
y = np.random.randint(0, 3, BATCH_SIZE)
history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=1, verbose=0)
print("TRAINED " + json.dumps({{
    "layers": {{layer.name: layer.dtype_policy.compute_dtype for layer in model.layers
               if not isinstance(layer, keras.layers.InputLayer)}},
    "optimizer": type(model.optimizer).__name__,
    "loss": float(history.history["loss"][0]),
}}))
"""


def _trained(snippet: str, build: str) -> dict:
    """What Keras trained with after `snippet` and a user's model, in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", snippet + USER_CODE.format(build=build)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("TRAINED ")]
    return json.loads(line.removeprefix("TRAINED "))


def _kept_answer():
    cells = [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [cell(KEPT, b, 0.4 * ms, 0.02, **KEPT_FACTS) for b, ms in FLOAT32_MS.items()]
    [found] = answers(summary_of(cells))
    return found


def test_the_chosen_policy_with_float32_layers_trains_as_chosen_when_pasted_into_user_code():
    found = _kept_answer()
    assert found.lead.startswith(f"seed_convnet on gpu0: Use {KEPT} at batch 128:")
    assert 'set_global_policy("mixed_float16")' in found.recipe
    assert "BATCH_SIZE = 128" in found.recipe
    got = _trained(found.recipe, "keep_float32(build_model())")
    assert got["layers"] == {"conv": "float16",
                             "depthwise": "float32", "pool": "float16", "dense": "float16",
                             "out": "float32"}
    assert got["optimizer"] == "LossScaleOptimizer"  # Keras scales the loss itself
    assert got["loss"] == got["loss"]  # not NaN

    # Kept the baseline: float32 at its best batch, nothing kept, nothing scaled.
    cells = [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [cell("mixed_float16", b, 2 * ms) for b, ms in FLOAT32_MS.items()]
    [keep] = answers(summary_of(cells))
    assert keep.lead.startswith("seed_convnet on gpu0: Keep float32")
    assert "keep_float32" not in keep.recipe and "variant" not in keep.recipe  # PyPI's
    assert f"BATCH_SIZE = {int(keep.choice.chosen['batch_size'])}" in keep.recipe
    got = _trained(keep.recipe, "build_model()")
    assert set(got["layers"].values()) == {"float32"}
    assert got["optimizer"] == "SGD"


def test_the_headline_and_the_report_give_the_lines_under_the_answer():
    found = _kept_answer()
    cells = [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [cell(KEPT, b, 0.4 * ms, 0.02, **KEPT_FACTS) for b, ms in FLOAT32_MS.items()]
    summary = summary_of(cells)
    said = headline_lines(summary)
    opened = said.index("  In your own code:")
    assert said.index(found.lead) < opened
    code = [line for line in found.recipe.splitlines() if line]  # blank lines left out
    assert said[opened + 1:opened + 1 + len(code)] == [f"    {line}" for line in code]
    _trained("\n".join(line.removeprefix("    ") for line in said[opened + 1:]
                       if line.startswith("    ")), "keep_float32(build_model())")
    page = render_html(summary, load_published(), breakdown_table([]))
    assert "In your own code" in page and "keep_float32(build_model())" in page


def test_an_answer_that_names_no_configuration_gives_no_lines():
    cells = [cell("float32", 32, 100.0, outcome="failed")]
    [found] = answers(summary_of(cells))
    assert found.recipe is None
    assert "  In your own code:" not in headline_lines(summary_of(cells))


def test_a_configuration_measured_on_another_build_names_it():
    cells = [cell("float32", b, ms, variant="source_avx2",
                  variant_description="TensorFlow built from source with AVX2 and FMA")
             for b, ms in FLOAT32_MS.items()]
    [found] = answers(summary_of(cells))
    assert ("# measured with the source_avx2 variant: TensorFlow built from source with AVX2 "
            "and FMA") in found.recipe.splitlines()
