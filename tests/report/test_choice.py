"""The choice the answer words: the configuration with the most images per second among the
cells that ran, fit and still learn, against the baseline's own best batch, its interval for
the choice; the paired comparison at the baseline's best batch where the two are apart."""

import math

import pytest
from answer_cases import (
    BFLOAT16_MS,
    FLOAT32_MS,
    GRID_F32_MS,
    GRID_SPEEDUP,
    SPEEDUP_LOG_SE,
    cell,
    grid,
    noisy_grid,
    summary_of,
    t_of,
    two_processes,
)

from mptbench.core import stats
from mptbench.report import choice
from mptbench.report.headline import best

WHERE = ("m1", "seed_convnet", "gpu0")


def _choose(cells: list[dict]) -> choice.Choice:
    return choice.choose(WHERE, summary_of(cells), "float32")


def test_the_choice_is_the_most_images_per_second_not_the_best_speedup():
    assert best(summary_of(grid())).row["batch_size"] == 32  # the best speedup, 2.5x
    found = _choose(grid())
    assert found.decision == choice.USE and found.verdict == "faster"
    assert (found.chosen["policy"], found.chosen["batch_size"]) == ("mixed_bfloat16", 256)
    assert found.top is found.chosen and found.base["batch_size"] == 128  # 356 images/s
    assert found.estimate.value == pytest.approx((256 / 310) / (128 / 360))
    assert (found.others, found.bases, found.comparisons, found.apart) == (4, 4, 2, True)


def test_cells_of_different_processes_get_an_unpaired_interval_for_the_choice_of_pairs():
    """Batch 256 against batch 128: the log ratio's standard error from both cells' own,
    Welch's degrees of freedom (0.02 and 0.01 on 2 each: 2.94, so 2), Bonferroni over the
    4 x 4 pairs chosen among and the two comparisons."""
    found = _choose(grid())
    assert found.estimate.log_se == pytest.approx(math.hypot(0.02, 0.01))
    assert found.estimate.df == 2
    assert t_of(found.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 32, 2))


def test_cells_of_one_comparison_group_keep_their_paired_interval_and_no_second_comparison():
    """float32's best batch is bfloat16's best too: the two took turns in the same processes,
    so the ratio is their paired speedup, widened for the choice of pairs alone."""
    cells = [cell("float32", b, ms) for b, ms in {128: 360.0, 256: 700.0}.items()]
    cells += [cell("mixed_bfloat16", b, ms, 0.02) for b, ms in {128: 170.0, 256: 300.0}.items()]
    found = _choose(cells)
    assert found.chosen["batch_size"] == found.base["batch_size"] == 256
    assert found.estimate.value == pytest.approx(700 / 300)
    assert found.estimate.log_se == SPEEDUP_LOG_SE
    assert t_of(found.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 4, 2))
    assert found.paired is None and found.comparisons == 1 and not found.apart


def test_a_host_widening_widens_the_choices_interval_as_the_cells_own():
    wide = [c | {"host_widening": 0.2} for c in grid()]
    plain, widened = _choose(grid()).estimate, _choose(wide).estimate
    assert widened.log_half_width == pytest.approx(plain.log_half_width + 0.4)  # both cells'


def test_the_fastest_cell_that_does_not_fit_is_left_out_with_why():
    found = _choose(grid(b256={"fits_at_batch": False, "fits_search_mb": 4096}))
    assert found.chosen["batch_size"] == 32  # the fastest that fits: 800 images/s
    [(row, why)] = found.left_out
    assert row["batch_size"] == 256 and why == "does not fit under the 4096 MB limit"


def test_a_batch_above_the_largest_that_fit_is_left_out_and_one_below_fits():
    found = _choose(grid(**{f"b{b}": {"largest_fit_batch": 128} for b in BFLOAT16_MS}))
    assert found.chosen["batch_size"] == 32
    assert [why for _, why in found.left_out] == ["does not fit in the device's memory"]
    assert choice.memory_check(found.chosen) is True


def test_a_configuration_that_learned_worse_is_left_out_fastest_first():
    found = _choose(grid(
        b256={"parity_verdict": "diverged"},
        b32={"parity_verdict": "ends higher"},
        b128={"parity_verdict": "follows the baseline", "fits_at_batch": True},
    ))
    assert found.chosen["batch_size"] == 128
    assert [(int(r["batch_size"]), why) for r, why in found.left_out] == [
        (256, "diverged in the parity check"),
        (32, "ended with a higher loss than float32 in the parity check"),
    ]


def test_where_nothing_beats_float32_the_choice_keeps_it():
    cells = [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [cell("mixed_float16", b, 2 * ms) for b, ms in FLOAT32_MS.items()]
    found = _choose(cells)
    assert found.decision == choice.KEEP and found.verdict == "slower"
    assert found.chosen is found.base and found.chosen["batch_size"] == 128
    assert found.top["policy"] == "mixed_float16" and not found.too_few


def test_a_gain_within_the_interval_for_the_choice_is_no_reason_to_switch():
    """3% more images per second, but the best of 4 against float32's best of 4, timed in
    different processes with 2% spread each: no measurable difference."""
    cells = [cell("float32", b, ms, 0.02) for b, ms in FLOAT32_MS.items()]
    cells += [cell("mixed_float16", b, ms / 1.03, 0.02, speedup_vs_baseline=1.03,
                   speedup_log_se=0.02, speedup_df=2) for b, ms in FLOAT32_MS.items()]
    cells[-1]["ms_per_step"] = 690.0  # batch 256: 371 images/s, float32's best is 356
    cells[-1]["images_per_sec"] = 256_000 / 690
    found = _choose(cells)
    assert found.top["batch_size"] == 256 and found.verdict == "no measurable difference"
    assert found.decision == choice.KEEP


def test_a_noisy_baseline_cell_does_not_hide_a_speedup_paired_at_every_batch():
    """float32's best is its noisy batch-32 cell; bfloat16's fastest (batch 256) against it,
    unpaired at 2 degrees of freedom for the best of 4 against 4, cannot tell 1.85x from none.
    The paired comparison at batch 32 can, and the choice is bfloat16 at its fastest batch."""
    found = _choose(noisy_grid(GRID_SPEEDUP))
    assert stats.verdict(found.estimate) == "no measurable difference"  # 0.4-9x, unpaired
    assert found.by_pair and found.decision == choice.USE and found.verdict == "faster"
    assert (found.chosen["policy"], found.chosen["batch_size"]) == ("mixed_bfloat16", 256)
    assert found.paired.row["batch_size"] == 32 and found.paired.count == 1
    assert t_of(found.paired.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 2, 2))
    assert 1 < found.paired.estimate.low < 1.73 < found.paired.estimate.high


def test_a_noisy_baseline_cell_and_no_difference_keep_the_baseline():
    """The same noisy grid with bfloat16 as fast as float32 at batch 32 (paired 1.00x) and its
    most images per second at batch 256 (1.05x there, in other processes than float32's best):
    keep float32; the paired comparison at its best batch found no more."""
    speedups = {32: 1.0, 64: 1.0, 128: 1.0, 256: 1.05}
    cells = noisy_grid(speedups)
    for c in cells:  # float32 at 256: 14200 ms, 18.0 images/s; bfloat16 18.9
        if c["batch_size"] == 256:
            ms = 14200.0 / speedups[256] ** (c["policy"] != "float32")
            c |= {"ms_per_step": ms, "images_per_sec": 256_000 / ms}
    found = _choose(cells)
    assert found.decision == choice.KEEP and found.verdict == "no measurable difference"
    assert found.chosen["policy"] == "float32" and found.top["batch_size"] == 256
    assert stats.verdict(found.paired.estimate) == "no measurable difference"


def test_the_paired_comparison_picks_among_the_policies_at_the_baselines_best_batch():
    """Two other policies at float32's best batch: the higher paired speedup is picked and
    widened for the best of 2 and the two comparisons. mixed_float16 ran the most images per
    second (batch 256, 2x, but its processes spread wide) and is measurably faster nowhere;
    the choice is bfloat16, at its own fastest batch."""
    cells = noisy_grid(GRID_SPEEDUP)
    float16 = {32: 1.02, 64: 1.0, 128: 1.0, 256: 2.0}
    cells += [
        cell("mixed_float16", b, ms / float16[b], 0.2, speedup_vs_baseline=float16[b],
             speedup_log_se=0.3, speedup_df=2)
        for b, ms in GRID_F32_MS.items()
    ]
    found = _choose(cells)
    assert found.top["policy"] == "mixed_bfloat16" and found.paired.count == 2
    assert t_of(found.paired.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 4, 2))
    assert t_of(found.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 64, 2))


def test_an_interval_on_one_degree_of_freedom_is_too_few_to_tell():
    """The try-out's 2 processes a cell: 0.06x with an interval of 0.00-1.86 tells nothing."""
    cells = two_processes("mixed_float16", 0.06, 0.3, 0.6)
    found = _choose(cells)
    assert found.decision == choice.KEEP and found.too_few
    assert found.verdict == "no measurable difference" and found.estimate.df == 1


def test_without_another_policy_or_without_the_baseline():
    baseline = _choose([cell("float32", b, ms) for b, ms in FLOAT32_MS.items()])
    assert baseline.decision == choice.BASELINE_ONLY and baseline.chosen["batch_size"] == 128
    other = _choose([cell("mixed_bfloat16", b, ms) for b, ms in BFLOAT16_MS.items()])
    assert other.decision == choice.NO_BASELINE and other.chosen["batch_size"] == 256
    nothing = _choose([cell("float32", 32, 100.0, outcome="oom", images_per_sec=None)])
    assert nothing.decision == choice.NOTHING and nothing.chosen is None


def test_two_processes_a_cell_in_different_groups_are_too_few_to_tell_too():
    """The try-out's case where the fastest other is not at the baseline's best batch: two
    cells of 2 processes each, unpaired (Welch's df may round up to 2): still too few."""
    cells = two_processes("mixed_bfloat16", 1.02, 0.05, 0.05)
    cells[-1] |= {"ms_per_step": 500.0, "images_per_sec": 256_000 / 500}  # its fastest: 256
    found = _choose(cells)
    assert found.apart and found.estimate.df == 2
    assert found.decision == choice.KEEP and found.too_few


def test_slower_in_the_processes_shared_is_the_one_verdict_where_the_ratio_tells_nothing():
    """The noisy grid with bfloat16 at half float32's speed at batch 32 (paired, ±4%) and its
    most images per second at batch 256, unpaired against float32's noisy best: the ratio
    tells nothing, the paired comparison says slower, and that is the verdict."""
    cells = noisy_grid({32: 0.5, 64: 0.9, 128: 0.95, 256: 1.05})
    found = _choose(cells)
    assert stats.verdict(found.estimate) == "no measurable difference"
    assert found.by_pair and found.decision == choice.KEEP and found.verdict == "slower"
    assert found.chosen is found.base and found.paired.row["batch_size"] == 32
    assert not found.too_few
