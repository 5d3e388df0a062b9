"""breakdown.csv and the class-by-class comparison: what was measured, nothing rescaled."""

import pandas as pd
import pytest
from records import record, summary_row

from mptbench.core.opclasses import CLASSES, STEP_CLASSES
from mptbench.report.breakdown import breakdown_table, explain, layers_table
from mptbench.report.sections import closure_text, comparison_table

CELL = {"experiment": "e", "machine": "box", "model": "m", "batch_size": 8}


def _record(policy: str, convs: float, timed: float, profiled: float, closure: float) -> dict:
    """A cell profiled on 2 executor threads: classes in ms summed over both."""
    classes = dict.fromkeys((c for c, _ in CLASSES), 0.0)
    classes |= {"conv_forward": convs, "idle": 4.0, "framework": 1.0, "background_input": 3.0}
    classes["unattributed"] = 2 * profiled - sum(classes[c] for c in STEP_CLASSES)
    return record(
        **CELL, policy=policy, ms_per_step=timed, profiled_ms_per_step=profiled,
        breakdown_closure=closure,
        breakdown={
            "classes_ms": classes,
            "classes_min_ms": {c: 0.9 * v for c, v in classes.items()},
            "classes_max_ms": {c: 1.1 * v for c, v in classes.items()},
            "threads": 2, "timed_ms_per_step": timed, "function_ms_per_step": profiled - 1,
            "profiles": 3, "profile_steps": 6,
        },
    )


def _summary(records):
    """Their rows: mixed_float16 1.2x faster than float32 (1.1-1.3)."""
    base, other = ({k: r[k] for k in (*CELL, "policy", "ms_per_step")} for r in records)
    return pd.DataFrame([
        summary_row(**base),
        summary_row(**other, speedup_vs_baseline=1.2, speedup_ci_low=1.1, speedup_ci_high=1.3,
                    speedup_verdict="faster"),
    ])


def test_the_table_keeps_raw_ms_the_threads_and_both_steps():
    records = [_record("float32", 20.0, 11.0, 13.0, 0.96), _record("mixed_float16", 8.0, 9.0,
                                                                    10.0, 1.02)]
    table = breakdown_table(records)
    assert len(table) == 2 * len(CLASSES)
    conv = table[(table["policy"] == "float32") & (table["op_class"] == "conv_forward")].iloc[0]
    # As measured: 20 ms over two threads is 10 ms of one 13 ms profiled step.
    assert conv["ms_per_step"] == 20.0 and conv["threads"] == 2 and conv["ms_of_step"] == 10.0
    assert conv["share_of_profiled_step"] == pytest.approx(10 / 13)
    assert (conv["ms_min"], conv["ms_max"]) == (pytest.approx(18.0), pytest.approx(22.0))
    assert (conv["profiled_ms_per_step"], conv["timed_ms_per_step"]) == (13.0, 11.0)
    # The step's classes add up to the profiled step (unattributed is their measured rest);
    # background input overlaps it and stays out of the sum.
    f32 = table[table["policy"] == "float32"]
    assert f32[f32["in_step"]]["ms_of_step"].sum() == pytest.approx(13.0)
    assert not f32.set_index("op_class").loc["background_input", "in_step"]

    [explained] = explain(table, _summary(records))
    text = explained["sentence"]
    assert text.startswith("mixed_float16 saved 6 ms in convolutions (2.5x faster)")
    assert "unattributed" not in text and "background" not in text
    rows = {r["name"]: r for r in explained["comparison"]["rows"]}
    assert rows["profiled step"]["baseline"] == 13.0 and rows["profiled step"]["policy"] == 10.0
    # What of it the train function took: the rest is Python and callbacks around the step.
    inside = rows["of which in the train function"]
    assert (inside["baseline"], inside["policy"]) == (12.0, 9.0)
    assert conv["function_ms_per_step"] == 12.0
    assert rows["timed step (no profiler)"]["ratio"] == pytest.approx(11 / 9)
    assert closure_text(explained) == (
        "The measured classes account for 96% (float32) and 102% (mixed_float16) of the "
        "profiled step."
    )
    assert comparison_table(explained)["head"][1]["small"] == "ms of the profiled step"


def test_a_profiler_that_slowed_the_two_steps_unalike_says_the_ms_do_not_split_the_difference():
    """Seen on the AMD EPYC with AVX512_BF16 (MobileNetV2): float32's profiled step 1.73x its
    timed one, the other policy's 1.19x; the profiles then put the policy ahead where the
    timing put it behind."""
    records = [_record("float32", 20.0, 63.6, 110.0, 0.82), _record("mixed_float16", 8.0, 74.7,
                                                                    93.9, 0.87)]
    [explained] = explain(breakdown_table(records), _summary(records))
    assert explained["sentence"].endswith(
        "The profiler slowed float32's step 1.73× and mixed_float16's 1.26× (profiled against "
        "timed): these ms are not the parts of the timed difference.")
    # Slowed alike (1.18x and 1.11x): nothing said.
    alike = [_record("float32", 20.0, 11.0, 13.0, 0.96), _record("mixed_float16", 8.0, 9.0,
                                                                  10.0, 1.02)]
    [plain] = explain(breakdown_table(alike), _summary(alike))
    assert "profiler slowed" not in plain["sentence"]


def test_a_closure_that_reads_low_because_of_python_around_the_step_says_so():
    """A short step on a busy machine: the train function took 5 of float32's 13 ms profiled
    step; the classes close on the function, and the sentence says where the rest went."""
    records = [_record("float32", 20.0, 11.0, 13.0, 0.42), _record("mixed_float16", 8.0, 9.0,
                                                                    10.0, 0.93)]
    records[0]["breakdown"]["function_ms_per_step"] = 5.0
    [explained] = explain(breakdown_table(records), _summary(records))
    assert closure_text(explained) == (
        "The measured classes account for 42% (float32) and 93% (mixed_float16) of the "
        "profiled step. Keras' train function took 5 of 13 ms (float32) and 9 of 10 ms "
        "(mixed_float16): the rest is Python and callbacks around it, which a busy machine "
        "makes longer."
    )


def test_a_profile_without_a_timeline_shows_no_framework_idle_or_closure():
    """A GPU's profile: op classes from the device, no executor threads: nothing invented."""
    records = [_record("float32", 20.0, 11.0, 13.0, 0.96), _record("mixed_float16", 8.0, 9.0,
                                                                    10.0, 1.02)]
    for r in records:
        for cls in ("framework", "idle", "unattributed"):
            del r["breakdown"]["classes_ms"][cls]
        r["breakdown"] |= {"threads": None, "closure": None, "function_ms_per_step": None}
    table = breakdown_table(records)
    [explained] = explain(table, _summary(records))
    names = [r["name"] for r in explained["comparison"]["rows"]]
    assert "unattributed" not in names and not any(n.startswith("idle") for n in names)
    assert "of which in the train function" not in names and "profiled step" in names
    assert closure_text(explained) is None


def _layers(rows: list[tuple[str, str, str, float]]) -> list[dict]:
    """Layer rows (layer, its type, op class, ms a step) as jobs/profiles.py writes them."""
    return [{"layer": layer, "layer_type": kind, "op_class": cls, "ms": ms, "ms_min": ms,
             "ms_max": ms, "ops": 2.0, "op_types": ["Conv2D"]} for layer, kind, cls, ms in rows]


def test_layers_csv_puts_each_layer_beside_the_baselines_and_adds_up_to_the_classes():
    records = [_record("float32", 20.0, 11.0, 13.0, 0.96), _record("mixed_float16", 8.0, 9.0,
                                                                    10.0, 1.02)]
    records[0]["breakdown"]["layers"] = _layers([
        ("conv2d", "Conv2D", "conv_forward", 12.0), ("conv2d_1", "Conv2D", "conv_forward", 8.0),
        ("depthwise", "DepthwiseConv2D", "conv_backward_input", 3.0)])
    records[1]["breakdown"]["layers"] = _layers([
        ("conv2d", "Conv2D", "conv_forward", 5.0), ("conv2d_1", "Conv2D", "conv_forward", 3.0),
        ("conv2d", "Conv2D", "cast", 0.5)])
    table = layers_table(records)
    mixed = table[table["policy"] == "mixed_float16"].set_index(["layer", "op_class"])
    assert mixed.loc[("conv2d", "conv_forward"), "baseline_ms_per_step"] == 12.0
    # A layer and class the baseline did not run (a cast) stands against 0 there.
    assert mixed.loc[("conv2d", "cast"), "baseline_ms_per_step"] == 0.0
    assert mixed.loc[("conv2d", "cast"), "name"] == "casts"
    # By layer type, the cell's rows add up to its convolutions in breakdown.csv.
    by_type = mixed.groupby("layer_type")["ms_per_step"].sum()
    assert by_type["Conv2D"] == pytest.approx(8.5)
    base = table[table["policy"] == "float32"]
    assert base[base["op_class"] == "conv_forward"]["ms_per_step"].sum() == 20.0
    assert set(base["layer_type"]) == {"Conv2D", "DepthwiseConv2D"}
    # Which kernels the process ran: oneDNN's implementations where it named some, else not
    # known where it was not asked.
    records[0]["fingerprint"]["kernels"] = "brg_conv_fwd:avx512_core_bf16"
    records[1]["fingerprint"].pop("kernels", None)
    found = layers_table(records).groupby("policy")["kernels"].first()
    assert found["float32"] == "oneDNN: brg_conv_fwd:avx512_core_bf16"
    assert pd.isna(found["mixed_float16"])
    # A cell without a profile by layer has no rows.
    del records[1]["breakdown"]["layers"]
    assert set(layers_table(records)["policy"]) == {"float32"}


def test_the_why_names_the_layer_types_that_moved_most_with_their_class():
    """mixed_float16 lost 14 ms (over 2 threads: 7 of a step) in its depthwise layers' backward
    passes and gained 4 (2) in its Conv2D layer: the sentence names the depthwise first, its
    class, both signs and the change to try; the table lists every type."""
    records = [_record("float32", 20.0, 11.0, 13.0, 0.96), _record("mixed_float16", 8.0, 9.0,
                                                                    10.0, 1.02)]
    records[0]["breakdown"]["layers"] = _layers([
        ("conv2d", "Conv2D", "conv_forward", 12.0),
        ("dw", "DepthwiseConv2D", "conv_backward_input", 6.0),
        ("dw_1", "DepthwiseConv2D", "conv_backward_input", 4.0)])
    records[1]["breakdown"]["layers"] = _layers([
        ("conv2d", "Conv2D", "conv_forward", 8.0),
        ("dw", "DepthwiseConv2D", "conv_backward_input", 14.0),
        ("dw_1", "DepthwiseConv2D", "conv_backward_input", 10.0),
        ("dw", "DepthwiseConv2D", "cast", 0.2)])
    records[1]["fingerprint"]["kernels"] = None  # oneDNN asked, and it created none
    [explained] = explain(breakdown_table(records), _summary(records), layers_table(records))
    said = explained["layer_sentence"]
    assert said.startswith("By layer, mixed_float16's ops took +5.1 ms a step")
    assert "Its kernels: TensorFlow's own kernels (oneDNN created none)." in said
    depthwise = said.index("the 2 DepthwiseConv2D layers +7.1 ms")
    assert depthwise < said.index("the Conv2D layer -2.0 ms")
    assert "(most of it convolution backward (input), +7.0 ms)" in said
    assert said.endswith("To try: policy mixed_float16_keep_DepthwiseConv2D (its DepthwiseConv2D "
                         "layers in float32), timed beside the others.")
    assert [t["layer_type"] for t in explained["layer_types"]] == ["DepthwiseConv2D", "Conv2D"]
    # A kept policy is not told to keep them again.
    for r in records[1:]:
        r["policy"] = "mixed_float16_keep_Dense"
    [kept_one] = explain(breakdown_table(records), _summary(records), layers_table(records))
    assert "+7.1 ms" in kept_one["layer_sentence"] and "To try" not in kept_one["layer_sentence"]
    # Cells not profiled by layer: no sentence, no table.
    for r in records:
        del r["breakdown"]["layers"]
    [plain] = explain(breakdown_table(records), _summary(records), layers_table(records))
    assert plain["layer_sentence"] is None and plain["layer_types"] == []
