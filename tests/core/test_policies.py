"""A policy is what its yaml says: compute dtype, variable dtype, loss scaling, and whether it
is the baseline."""

from mptbench.core.policies import Policy, keeping, kept, order, policy_of_record


def test_keras_names_follow_the_dtypes():
    assert Policy("a", "float32", "float32").keras_name == "float32"
    assert Policy("b", "bfloat16", "float32").keras_name == "mixed_bfloat16"
    assert Policy("c", "float16", "float32", "dynamic").keras_name == "mixed_float16"
    assert Policy("d", "bfloat16", "bfloat16").keras_name == "bfloat16"


def test_impossible_combinations_are_named():
    assert (
        "Keras keeps mixed policies' variables in float32"
        in Policy("x", "float16", "bfloat16").problem()
    )
    assert "always scales its loss" in Policy("y", "float16", "float32", "none").problem()
    assert Policy("z", "bfloat16", "float32").problem() is None


def test_a_record_carries_its_policy_and_an_unknown_name_gets_no_dtype():
    record = {"policy": "fast", "compute_dtype": "bfloat16", "baseline": False}
    assert policy_of_record(record) == Policy("fast", "bfloat16")
    fp32 = policy_of_record({"policy": "fp32", "compute_dtype": "float32", "baseline": True})
    assert fp32.baseline and fp32.name == "fp32"
    # Hand-made records that say only a Keras policy's name: float32 is then the baseline.
    assert policy_of_record({"policy": "mixed_float16"}).compute_dtype == "float16"
    assert policy_of_record({"policy": "float32"}).baseline
    assert not policy_of_record({"policy": "mixed_float16"}).baseline
    assert policy_of_record({"policy": "fp8_experiment"}).compute_dtype == "unknown"


def test_order_puts_the_baseline_first_then_by_dtype():
    names = {
        "mixed_bfloat16": (False, "bfloat16"),
        "zz": (False, "float32"),
        "mixed_float16": (False, "float16"),
        "reference": (True, "bfloat16"),
    }
    assert order(names) == ["reference", "zz", "mixed_float16", "mixed_bfloat16"]


def test_a_kept_policys_name_spells_its_policy_and_the_layers_it_keeps_in_float32():
    assert kept("mixed_bfloat16_keep_DepthwiseConv2D") == ("mixed_bfloat16", ("DepthwiseConv2D",))
    assert kept("mixed_float16_keep_DepthwiseConv2D_Dense") == (
        "mixed_float16", ("DepthwiseConv2D", "Dense"))
    assert kept("mixed_bfloat16") is None and kept("_keep_Dense") is None
    facts = keeping("float32_keep_Dense", {"compute_dtype": "float32", "baseline": True})
    assert facts == {"compute_dtype": "float32", "baseline": False, "float32_layers": ["Dense"]}
    policy = Policy.of("mixed_bfloat16_keep_Conv2D", keeping(
        "mixed_bfloat16_keep_Conv2D", {"compute_dtype": "bfloat16"}))
    assert policy.float32_layers == ("Conv2D",) and policy.keras_name == "mixed_bfloat16"
