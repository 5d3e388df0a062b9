"""The answer the report opens with: the configuration with the most images per second among
the cells that ran, fit and still learn, against the baseline's own best batch, with an
interval for the choice and what it is on a whole training run."""

import math

import markupsafe
import pandas as pd
import pytest

from mptbench.core import stats
from mptbench.core.record import COLUMNS, FIELDS
from mptbench.report.answer import answer_lines, answers
from mptbench.report.breakdown import breakdown_table
from mptbench.report.headline import answer_metrics_and_tags, best
from mptbench.report.html import HOW_TO_READ, render_html
from mptbench.report.published import load_published
from mptbench.report.summary import CELL_KEYS, summarise

# float32's and mixed_bfloat16's mean step (ms) per batch size on one GPU: bfloat16's best
# speedup is at batch 32 (100/40 = 2.5x), its most images per second at batch 256 (826/s).
FLOAT32_MS = {32: 100.0, 64: 190.0, 128: 360.0, 256: 760.0}
BFLOAT16_MS = {32: 40.0, 64: 90.0, 128: 170.0, 256: 310.0}
SPEEDUP_LOG_SE = 0.005  # paired: far narrower than either cell's own spread


def _cell(policy: str, batch: int, ms: float, se: float = 0.01, **more) -> dict:
    """A summary row of an ok cell timed in 3 processes, its interval ±5% of its mean step;
    its whole run the 2020 experiment's (20 epochs with validation after each) on 12800
    images, the steps' time and a fifth more for validation and the first epoch, ±5% too; no
    fits search and no parity run unless `more` says so."""
    whole = 1.2 * 20 * (12800 // batch) * ms / 1000
    row = dict.fromkeys(COLUMNS)
    row |= {
        "experiment": "unit", "machine": "m1", "model": "seed_convnet", "backend": "tensorflow",
        "dataset": "imagenette2-320", "image_size": 256, "variant": "pypi", "device": "gpu0",
        "policy": policy, "baseline": policy == "float32", "batch_size": batch, "outcome": "ok",
        "compute_dtype": "float32" if policy == "float32" else policy.removeprefix("mixed_"),
        "ms_per_step": ms, "ms_per_step_log_se": se, "ms_per_step_df": 2,
        "ms_per_step_ci_low": 0.95 * ms, "ms_per_step_ci_high": 1.05 * ms,
        "images_per_sec": 1000 * batch / ms, "train_examples": 12800, "train_epochs": 1,
        "fullrun_s": whole, "fullrun_s_ci_low": 0.95 * whole, "fullrun_s_ci_high": 1.05 * whole,
        "fullrun_epochs": 20, "fullrun_validates": True,
        "fullrun_source": "the 2020 experiment's",
    }
    return row | more


def _summary(cells: list[dict]) -> pd.DataFrame:
    """summary.csv's shape: numeric columns numeric, and each other policy's paired speedup
    over the baseline of its comparison group (its batch size) where it has none."""
    df = pd.DataFrame(cells, columns=COLUMNS)
    for f in FIELDS:
        if f.numeric:
            df[f.name] = pd.to_numeric(df[f.name], errors="coerce")
    baseline = df["baseline"].astype(bool)
    base = {tuple(df.loc[i, CELL_KEYS]): df.at[i, "ms_per_step"] for i in df.index[baseline]}
    for i in df.index[~baseline]:
        ms = base.get(tuple(df.loc[i, CELL_KEYS]))
        if ms is not None and pd.isna(df.at[i, "speedup_vs_baseline"]):
            df.at[i, "speedup_vs_baseline"] = ms / df.at[i, "ms_per_step"]
            df.at[i, "speedup_log_se"], df.at[i, "speedup_df"] = SPEEDUP_LOG_SE, 2
    return df


def _grid(**bfloat16: dict) -> list[dict]:
    """The two policies' cells; `bfloat16` adds columns to its cell at a batch (b256=...)."""
    cells = [_cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [
        _cell("mixed_bfloat16", b, ms, 0.02, **bfloat16.get(f"b{b}", {}))
        for b, ms in BFLOAT16_MS.items()
    ]
    return cells


def _t_of(estimate: stats.Estimate) -> float:
    return estimate.log_half_width / estimate.log_se


def test_the_answer_is_the_most_images_per_second_not_the_best_speedup():
    summary = _summary(_grid())
    assert best(summary).row["batch_size"] == 32  # the best speedup, 2.5x
    [answer] = answers(summary)
    assert (answer.chosen["policy"], answer.chosen["batch_size"]) == ("mixed_bfloat16", 256)
    assert answer.base["batch_size"] == 128  # float32's own best: 356 images/s
    assert answer.estimate.value == pytest.approx((256 / 310) / (128 / 360))
    assert answer.sentence.startswith(
        "seed_convnet on gpu0: use mixed_bfloat16 at batch 256: 826 images/s, 2.32× float32's "
        "best, 356 images/s at batch 128 (95% interval "
    )
    assert (", timed in different processes, widened for the best of 4 against float32's best "
            "of 4 and the two comparisons); ") in answer.sentence


def test_cells_of_different_processes_get_an_unpaired_interval_for_the_choice_of_pairs():
    """Batch 256 against batch 128: the log ratio's standard error from both cells' own,
    Welch's degrees of freedom (0.02 and 0.01 on 2 each: 2.94, so 2), Bonferroni over the
    4 x 4 pairs the answer chose among and the two comparisons (this one and the paired one at
    float32's best batch)."""
    [answer] = answers(_summary(_grid()))
    assert answer.estimate.log_se == pytest.approx(math.hypot(0.02, 0.01))
    assert answer.estimate.df == 2
    assert _t_of(answer.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 32, 2))
    low, high = answer.estimate.low, answer.estimate.high
    assert f"(95% interval {low:.2f}–{high:.2f}, timed in different processes, " in answer.sentence


def test_cells_of_one_comparison_group_keep_their_paired_interval():
    """float32's best batch is bfloat16's best too: the two took turns in the same processes,
    so the ratio is their paired speedup, its interval theirs widened for the choice."""
    cells = [_cell("float32", b, ms) for b, ms in {128: 360.0, 256: 700.0}.items()]
    cells += [_cell("mixed_bfloat16", b, ms, 0.02) for b, ms in {128: 170.0, 256: 300.0}.items()]
    [answer] = answers(_summary(cells))
    assert answer.chosen["batch_size"] == answer.base["batch_size"] == 256
    assert answer.estimate.value == pytest.approx(700 / 300)
    assert answer.estimate.log_se == SPEEDUP_LOG_SE
    assert _t_of(answer.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 4, 2))


def test_a_configuration_that_does_not_fit_is_no_answer():
    cells = _grid(b256={"fits_at_batch": False, "memory_limit_mb": 4096})
    [answer] = answers(_summary(cells))
    assert answer.chosen["batch_size"] == 32  # the fastest that fits: 800 images/s
    assert "use mixed_bfloat16 at batch 32: 800 images/s" in answer.sentence
    assert answer.sentence.endswith(
        "; faster but left out: mixed_bfloat16 at batch 256 (does not fit under the 4096 MB "
        "limit)."
    )


def test_a_batch_above_the_largest_that_fit_is_no_answer_and_one_below_fits():
    cells = _grid(**{f"b{b}": {"largest_fit_batch": 128} for b in BFLOAT16_MS})
    [answer] = answers(_summary(cells))
    assert answer.chosen["batch_size"] == 32
    assert "; fits in the device's memory, parity not checked; " in answer.sentence
    assert "(does not fit in the device's memory)" in answer.sentence


def test_a_configuration_that_diverged_is_no_answer():
    cells = _grid(
        b256={"parity_verdict": "diverged"},
        b32={"parity_verdict": "ends higher"},
        b128={"parity_verdict": "follows the baseline", "fits_at_batch": True},
    )
    [answer] = answers(_summary(cells))
    assert answer.chosen["batch_size"] == 128
    assert "; fits in the device's memory, learns as float32 does (parity check); " in (
        answer.sentence
    )
    assert answer.sentence.endswith(
        "faster but left out: mixed_bfloat16 at batch 256 (diverged in the parity check), "
        "mixed_bfloat16 at batch 32 (ended with a higher loss than float32 in the parity check)."
    )


def test_where_nothing_beats_float32_the_answer_says_keep_it():
    cells = [_cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [_cell("mixed_float16", b, 2 * ms) for b, ms in FLOAT32_MS.items()]
    [answer] = answers(_summary(cells))
    assert answer.chosen["policy"] == "float32" and answer.chosen["batch_size"] == 128
    assert answer.sentence.startswith(
        "seed_convnet on gpu0: keep float32 here: no other policy measurably beats its best, "
        "356 images/s at batch 128; the fastest other, mixed_float16 at batch 128, 178 "
        "images/s, is 0.50× that (95% interval "
    )
    assert "), slower; float32 fit not checked; " in answer.sentence


def test_a_gain_within_the_interval_for_the_choice_is_no_reason_to_switch():
    """3% more images per second, but the best of 4 against float32's best of 4, timed in
    different processes with 2% spread each: no measurable difference."""
    cells = [_cell("float32", b, ms, 0.02) for b, ms in FLOAT32_MS.items()]
    cells += [_cell("mixed_float16", b, ms / 1.03, 0.02, speedup_vs_baseline=1.03,
                    speedup_log_se=0.02, speedup_df=2) for b, ms in FLOAT32_MS.items()]
    cells[-1]["ms_per_step"] = 690.0  # batch 256: 371 images/s, float32's best is 356
    cells[-1]["images_per_sec"] = 256_000 / 690
    [answer] = answers(_summary(cells))
    assert answer.top["batch_size"] == 256 and answer.verdict == "no measurable difference"
    assert answer.sentence.startswith("seed_convnet on gpu0: keep float32 here: ")
    assert "), no measurable difference; " in answer.sentence


# The default grid on a 2-core AMD EPYC (bench/README.md, bench_grid): mixed_bfloat16 1.73-1.89x
# float32 at every batch, each paired interval about ±5%; float32's three processes at batch 32
# spread 1268-2451 ms (2 degrees of freedom: log_se 0.0766), the rest about ±5%.
GRID_F32_MS = {32: 1763.0, 64: 3620.0, 128: 7300.0, 256: 14600.0}
GRID_SPEEDUP = {32: 1.73, 64: 1.76, 128: 1.81, 256: 1.89}
GRID_F32_SE = {32: 0.0766, 64: 0.01, 128: 0.01, 256: 0.01}


def _noisy_grid(speedups: dict[int, float]) -> list[dict]:
    cells = [_cell("float32", b, ms, GRID_F32_SE[b]) for b, ms in GRID_F32_MS.items()]
    cells += [
        _cell("mixed_bfloat16", b, ms / speedups[b], 0.01, speedup_vs_baseline=speedups[b],
              speedup_log_se=0.019, speedup_df=2)
        for b, ms in GRID_F32_MS.items()
    ]
    return cells


def test_a_noisy_baseline_cell_does_not_hide_a_speedup_paired_at_every_batch():
    """float32's best is its noisy batch-32 cell; bfloat16's fastest (batch 256) against it,
    unpaired at 2 degrees of freedom for the best of 4 against 4, cannot tell 1.85x from none.
    The paired comparison at batch 32 can, and the answer says use bfloat16."""
    [answer] = answers(_summary(_noisy_grid(GRID_SPEEDUP)))
    assert stats.verdict(answer.estimate) == "no measurable difference"  # 0.4-9x, unpaired
    assert answer.verdict == "faster"
    assert (answer.chosen["policy"], answer.chosen["batch_size"]) == ("mixed_bfloat16", 256)
    assert answer.paired.row["batch_size"] == 32 and answer.paired.count == 1
    assert _t_of(answer.paired.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 2, 2))
    low, high = answer.paired.estimate.low, answer.paired.estimate.high
    assert 1 < low < 1.73 < high
    assert answer.sentence.startswith(
        "seed_convnet on gpu0: use mixed_bfloat16 at batch 256: 33.1 images/s; at float32's "
        f"best, batch 32, mixed_bfloat16 runs 1.73× as fast (95% interval {low:.2f}–{high:.2f}, "
        "widened for the two comparisons); against float32's best, 18.2 images/s at batch 32, "
        "it is 1.83× (95% interval "
    )
    assert (", timed in different processes, widened for the best of 4 against float32's best "
            "of 4 and the two comparisons); fit not checked, parity not checked; ") in (
        answer.sentence
    )
    metrics, _ = answer_metrics_and_tags(_summary(_noisy_grid(GRID_SPEEDUP)))
    key = "m1.seed_convnet.gpu0"
    assert metrics[f"answer_at_baseline_batch.{key}"] == pytest.approx(1.73)
    assert metrics[f"answer_at_baseline_batch_ci_low.{key}"] == pytest.approx(low)
    assert metrics[f"answer_vs_baseline_ci_low.{key}"] < 1  # the unpaired one, said beside it


def test_a_noisy_baseline_cell_and_no_difference_keep_the_baseline():
    """The same noisy grid with bfloat16 as fast as float32 at batch 32 (paired 1.00x) and its
    most images per second at batch 256 (1.05x there, in other processes than float32's best):
    keep float32, and say what the paired comparison at its best batch found."""
    speedups = {32: 1.0, 64: 1.0, 128: 1.0, 256: 1.05}
    cells = _noisy_grid(speedups)
    for cell in cells:  # float32 at 256: 14200 ms, 18.0 images/s; bfloat16 18.9
        if cell["batch_size"] == 256:
            ms = 14200.0 / speedups[256] ** (cell["policy"] != "float32")
            cell |= {"ms_per_step": ms, "images_per_sec": 256_000 / ms}
    [answer] = answers(_summary(cells))
    assert answer.verdict == "no measurable difference"
    assert answer.chosen["policy"] == "float32" and answer.top["batch_size"] == 256
    assert answer.sentence.startswith("seed_convnet on gpu0: keep float32 here: ")
    assert "; at float32's best, batch 32, mixed_bfloat16 runs 1.00× as fast (95% interval " in (
        answer.sentence
    )
    assert "the two comparisons), no measurable difference; float32 fit not checked; " in (
        answer.sentence
    )


def test_the_paired_comparison_picks_among_the_policies_at_the_baselines_best_batch():
    """Two other policies at float32's best batch: the higher paired speedup is picked and
    widened for the best of 2 and the two comparisons. mixed_float16 ran the most images per
    second (batch 256, 2x, but its processes spread wide) and is measurably faster nowhere;
    the answer names bfloat16, at its own fastest batch."""
    cells = _noisy_grid(GRID_SPEEDUP)
    float16 = {32: 1.02, 64: 1.0, 128: 1.0, 256: 2.0}
    cells += [
        _cell("mixed_float16", b, ms / float16[b], 0.2, speedup_vs_baseline=float16[b],
              speedup_log_se=0.3, speedup_df=2)
        for b, ms in GRID_F32_MS.items()
    ]
    [answer] = answers(_summary(cells))
    assert answer.top["policy"] == "mixed_bfloat16" and answer.paired.count == 2
    assert _t_of(answer.paired.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 4, 2))
    assert "widened for the best of 2 and the two comparisons); against float32's best, " in (
        answer.sentence
    )
    assert answer.sentence.startswith("seed_convnet on gpu0: use mixed_bfloat16 at batch 256: ")
    assert _t_of(answer.estimate) == pytest.approx(stats.t_quantile(1 - 0.05 / 64, 2))


def test_where_the_fastest_cells_share_a_group_only_their_paired_speedup_judges():
    """No second comparison where the two cells are one group: its interval is widened for
    the choice of pairs alone, and the sentence names no second comparison."""
    cells = [_cell("float32", b, ms) for b, ms in {128: 360.0, 256: 700.0}.items()]
    cells += [_cell("mixed_bfloat16", b, ms, 0.02) for b, ms in {128: 350.0, 256: 300.0}.items()]
    [answer] = answers(_summary(cells))
    assert answer.paired is None
    assert "two comparisons" not in answer.sentence and "different processes" not in (
        answer.sentence
    )


def test_unchecked_fit_and_parity_are_said():
    [answer] = answers(_summary(_grid()))
    assert "; fit not checked, parity not checked; " in answer.sentence


def test_a_training_run_is_the_2020_experiments_whole_run_with_its_interval():
    """12800 examples: 50 steps of 256 an epoch, 1000 in 20 epochs at 310 ms, and a fifth more:
    6.2 min; float32 at batch 128, 2000 steps at 360 ms and a fifth more: 14 min; each range
    the whole run's interval, ±5%."""
    [answer] = answers(_summary(_grid()))
    assert (
        "; 20 epochs of imagenette2-320 with validation after each (the 2020 experiment's "
        "run): float32 at batch 128 14 min (14–15), mixed_bfloat16 at batch 256 6.2 min "
        "(5.9–6.5)."
    ) in answer.sentence


def test_an_experiment_that_trains_several_epochs_is_timed_at_its_own():
    cells = [c | {"fullrun_epochs": 60, "fullrun_source": "train.epochs",
                  "fullrun_validates": False,
                  "fullrun_s": 60 * (12800 // c["batch_size"]) * c["ms_per_step"] / 1000,
                  "fullrun_s_ci_low": None} for c in _grid()]
    [answer] = answers(_summary(cells))
    assert "; 60 epochs of imagenette2-320 (train.epochs): float32 at batch 128 36 min " in (
        answer.sentence
    )


def test_without_a_whole_run_the_time_is_not_guessed_and_says_why():
    why = "no validation split: the whole run is its steps alone"
    cells = [c | {"fullrun_s": None, "fullrun_note": why} for c in _grid()]
    [answer] = answers(_summary(cells))
    assert f"; a whole run's time not known ({why})" in answer.sentence


def test_a_host_that_ran_slower_than_its_own_is_said_and_widens():
    cells = [c | {"host_slowdown_most": 1.8, "host_widening": 0.5} for c in _grid()]
    [answer] = answers(_summary(cells))
    assert answer.sentence.endswith("; the host ran up to 1.8× slower than its own while these "
                                    "were timed; their intervals are widened for it.")
    quiet = [c | {"host_slowdown_most": 1.04, "host_widening": 0.0} for c in _grid()]
    [answer] = answers(_summary(quiet))
    assert "host" not in answer.sentence


def test_one_answer_per_machine_model_and_device_naming_several_backends():
    cells = _grid() + [c | {"device": "cpu"} for c in _grid()]
    # jax twice as fast, its cells timed tightly enough to beat the best of 8 against 8.
    cells += [c | {"backend": "jax", "ms_per_step": 0.5 * c["ms_per_step"], "ms_per_step_log_se":
                   0.002, "images_per_sec": 2 * c["images_per_sec"]} for c in _grid()]
    found = answers(_summary(cells))
    assert [a.where for a in found] == [("m1", "seed_convnet", "cpu"), ("m1", "seed_convnet",
                                                                         "gpu0")]
    gpu = found[1].sentence
    assert gpu.startswith("seed_convnet on gpu0: use mixed_bfloat16 at batch 256 on jax: ")
    assert "float32's best, 711 images/s at batch 128 on jax (" in gpu
    assert found[0].sentence.startswith("seed_convnet on cpu: use mixed_bfloat16 at batch 256:")


def _record(policy: str, ms: float) -> dict:
    """A run record of 3 processes taking turns, 4 rounds each, from a 5-epoch experiment on
    9469 training images."""
    repeats = [
        {"repeat": i + 1, "process": f"p{i}", "outcome": "ok", "rounds": [0, 1, 2, 3],
         "step_ms": [ms * (1 + 0.01 * i)] * 4}
        for i in range(3)
    ]
    return {
        "experiment": "unit", "model": "seed_convnet", "dataset": "imagenette2-320",
        "device": "cpu", "variant": "pypi", "backend": "tensorflow", "policy": policy,
        "batch_size": 32, "outcome": "ok", "ms_per_step": ms, "ms_per_step_log_se": 0.006,
        "ms_per_step_df": 2, "ms_per_step_ci_low": 0.97 * ms, "ms_per_step_ci_high": 1.03 * ms,
        "images_per_sec": 32_000 / ms, "compute_dtype": "float32" if policy == "float32"
        else "bfloat16", "baseline": policy == "float32", "repeats": repeats,
        "train_examples": 9469, "config": {"train": {"epochs": 5, "repeats": 3}},
        "fullrun_s": 5 * 295 * ms / 1000, "fullrun_epochs": 5, "fullrun_validates": False,
        "fullrun_source": "train.epochs",
    }


def test_a_run_records_whole_run_reaches_the_answer():
    summary = summarise([_record("float32", 400.0), _record("mixed_bfloat16", 250.0)])
    [sentence] = answer_lines(summary)
    # 9469 // 32 = 295 steps an epoch, 5 epochs at 400 ms: 9.8 min.
    assert "; 5 epochs of imagenette2-320 (train.epochs): float32 at batch 32 9.8 min " in sentence
    assert sentence.startswith("seed_convnet on cpu: use mixed_bfloat16 at batch 32: 128 images/s")


def test_the_report_page_opens_with_the_answer():
    records = [_record("float32", 400.0), _record("mixed_bfloat16", 250.0)]
    summary = summarise(records)
    page = render_html(summary, load_published(), breakdown_table(records))
    [sentence] = answer_lines(summary)
    opening = page.split("<h1>", 1)[1]
    assert opening.index(str(markupsafe.escape(sentence))) < opening.index(
        str(markupsafe.escape(HOW_TO_READ[:60]))
    )
    assert opening.index('<section class="answer" id="answer">') < opening.index("<p")
    assert opening.index(str(markupsafe.escape(sentence))) < opening.index('<p class="meta">')
