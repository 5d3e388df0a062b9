"""The answer in words: a lead a reader can act on (the decision, the factor with its interval,
a whole run before and after), then short sentences of their own. What is chosen is
report/choice.py's (tests/report/test_choice.py)."""

import markupsafe
import pytest
from answer_cases import (
    FLOAT32_MS,
    GRID_SPEEDUP,
    cell,
    grid,
    noisy_grid,
    record,
    summary_of,
    two_processes,
)

from mptbench.core.epochs import REMEDY
from mptbench.report.answer import answers
from mptbench.report.breakdown import breakdown_table
from mptbench.report.headline import answer_metrics_and_tags, headline_lines
from mptbench.report.html import HOW_TO_READ, render_html
from mptbench.report.published import load_published
from mptbench.report.summary import summarise


def _answer(cells):
    [found] = answers(summary_of(cells))
    return found


def test_a_faster_policy_reads_use_with_its_factor_and_the_whole_run_before_and_after():
    found = _answer(grid())
    assert found.lead == (
        "seed_convnet on gpu0: Use mixed_bfloat16 at batch 256: 2.32× float32's best "
        "(1.32–4.09); 20 epochs with validation: 14 min → 6.2 min; parity not checked."
    )
    # One detail each: the throughputs, the widening, the paired figure, fit and parity, the
    # whole run per policy; each with its figures.
    throughput, widened, paired, checks, whole = found.details
    assert "826 images/s" in throughput and "batch 128: 356 images/s" in throughput
    assert "best of 4" in widened and "different processes" in widened
    assert "2.12×" in paired and "(2.05–2.18)" in paired and "same processes" in paired
    assert "fit not checked" in checks and "parity not checked" in checks
    assert "float32 at batch 128 14 min (14–15)" in whole
    assert "mixed_bfloat16 at batch 256 6.2 min (5.9–6.5)" in whole


def test_a_speedup_only_the_paired_comparison_tells_leads_with_that_comparison():
    found = _answer(noisy_grid(GRID_SPEEDUP))
    assert found.lead == (
        "seed_convnet on gpu0: Use mixed_bfloat16 at batch 256: 1.73× float32 at batch 32, "
        "paired (1.54–1.95); 20 epochs with validation: 4.7 h → 2.6 h; parity not checked."
    )
    unpaired = found.details[1]  # the unpaired figure, said beside the paired lead
    assert "against float32's best, at batch 32: 1.83× (0.26–12.86)" in unpaired
    assert "different processes" in unpaired and "best of 4" in unpaired
    metrics, tags = answer_metrics_and_tags(summary_of(noisy_grid(GRID_SPEEDUP)))
    key = "m1.seed_convnet.gpu0"
    assert tags[f"answer.{key}"] == found.lead  # the MLflow sweep run's tag: the lead
    assert tags[f"answer_details.{key}"] == " ".join(found.details)
    assert metrics[f"answer_at_baseline_batch.{key}"] == pytest.approx(1.73)
    assert metrics[f"answer_vs_baseline_ci_low.{key}"] < 1  # the unpaired one, said beside it


def test_keeping_the_baseline_says_what_the_fastest_other_is_and_its_verdict_once():
    cells = [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [cell("mixed_float16", b, 2 * ms) for b, ms in FLOAT32_MS.items()]
    found = _answer(cells)
    assert found.lead == (
        "seed_convnet on gpu0: Keep float32: mixed_float16's best is 0.50× float32's best "
        "(0.46–0.55), slower; 20 epochs with validation: 14 min."
    )
    assert "float32 at batch 128: fit not checked." in found.details


def test_an_interval_on_one_degree_of_freedom_says_too_few_processes_to_tell():
    cells = two_processes("mixed_float16", 0.06, 0.3, 0.6)
    found = _answer(cells)
    assert found.lead == (
        "seed_convnet on gpu0: Keep float32: too few processes to tell mixed_float16 (0.06×) "
        "from it; 20 epochs with validation: 14 min."
    )
    assert "–" not in found.lead  # no interval of 0.00-1.86 that reads as a verdict


def test_the_cells_left_out_and_a_slowed_host_are_said_in_sentences_of_their_own():
    found = _answer(grid(b256={"fits_at_batch": False, "fits_search_mb": 4096}))
    left_out = found.details[-1]
    assert left_out.startswith("Faster but left out: mixed_bfloat16 at batch 256")
    assert "does not fit under the 4096 MB limit" in left_out
    slowed = _answer([c | {"host_slowdown_most": 1.8, "host_widening": 0.5} for c in grid()])
    assert "1.8× slower" in slowed.details[-1] and "widened" in slowed.details[-1]
    quiet = _answer([c | {"host_slowdown_most": 1.04, "host_widening": 0.0} for c in grid()])
    assert "host" not in " ".join((quiet.lead, *quiet.details))


def test_an_experiment_that_trains_several_epochs_is_timed_at_its_own():
    cells = [c | {"fullrun_epochs": 60, "fullrun_source": "train.epochs",
                  "fullrun_validates": False,
                  "fullrun_s": 60 * (12800 // c["batch_size"]) * c["ms_per_step"] / 1000,
                  "fullrun_s_ci_low": None} for c in grid()]
    found = _answer(cells)
    assert found.lead.endswith("; 60 epochs: 36 min → 16 min; parity not checked.")
    whole = found.details[-1]
    assert whole.startswith("60 epochs") and "(train.epochs)" in whole
    assert "float32 at batch 128 36 min" in whole and "mixed_bfloat16 at batch 256 16 min" in whole


def test_without_a_whole_run_the_time_is_not_guessed_and_says_why():
    why = "no validation split: the whole run is its steps alone"
    found = _answer([c | {"fullrun_s": None, "fullrun_note": why} for c in grid()])
    assert found.lead.endswith("2.32× float32's best (1.32–4.09); parity not checked.")
    assert f"A whole run's time is not known ({why})." in found.details


def test_epoch_starts_that_waited_are_said_with_how_often_how_long_and_what_to_try():
    """float32 at batch 128 waited at 7 of 12 timed epoch starts, mixed_bfloat16 at batch 256
    at 5 of 11; their whole runs' epoch starts come to 114 and 30 s."""
    waits = {128: (7, 12, 2100, 6.2, 114.0), 256: (5, 11, 900, 2.5, 30.0)}
    cells = [c | dict(zip(("epoch_starts_waited", "epoch_starts_timed", "epoch_wait_most_ms",
                           "fullrun_epoch_wait_s", "fullrun_epoch_starts_s"),
                          waits[c["batch_size"]], strict=True))
             if c["batch_size"] in waits else c for c in grid()]
    said = [d for d in _answer(cells).details if d.startswith("Epochs start at two speeds")]
    assert len(said) == 1
    assert "float32 at batch 128: 7 of 12 timed epoch starts waited" in said[0]
    assert "up to 2.1 s here, 6.2 s each on average at this run's epoch length: 114 s" in said[0]
    assert "mixed_bfloat16 at batch 256: 5 of 11" in said[0]
    assert said[0].endswith(f"{REMEDY}.")
    # The share is the timing epochs' own: a user's feed may lose the race more often.
    assert "set by the input pipeline's ops and the machine, not by the model" in said[0]
    # Where no start waited, nothing is said.
    calm = [c | {"epoch_starts_waited": 0, "epoch_starts_timed": 12} for c in grid()]
    assert not [d for d in _answer(calm).details if d.startswith("Epochs start")]


def test_epochs_that_end_near_a_wake_say_a_start_may_lose_nearly_nothing_or_a_whole_period():
    """float32 at batch 128: epochs of 9.8 s, the tuning thread's wake at 10.23 s within their
    spread; after it, the next wake is at 20.47 s."""
    waits = {"epoch_starts_waited": 1, "epoch_starts_timed": 6, "epoch_wait_most_ms": 9160,
             "fullrun_epoch_wait_s": 3.1, "fullrun_epoch_starts_s": 59.0,
             "fullrun_epoch_s": 9.8, "fullrun_epoch_wake_s": 10.23}
    cells = [c | waits if c["batch_size"] == 128 else c for c in grid()]
    said = next(d for d in _answer(cells).details if d.startswith("Epochs start at two speeds"))
    assert ("3.1 s each on average at this run's epoch length (its epochs, about 9.8 s, end "
            "near the thread's wake at 10 s: a start that waits loses from nearly nothing to "
            "10 s): 59 s of its whole run") in said


def test_records_that_timed_no_epoch_start_say_nothing_of_them():
    """The try-out's cells: 2 epochs of their own, so no start is timed (the second's is left
    out); summary.csv holds no count, and the answer says nothing of epoch starts."""
    none = {"epoch_starts_timed": None, "epoch_starts_waited": None,
            "epoch_note": "no epoch start timed"}
    summary = summarise([record("float32", 400.0) | none, record("mixed_bfloat16", 250.0) | none])
    [found] = answers(summary)
    assert found.lead.startswith("seed_convnet on cpu: Use mixed_bfloat16")
    assert not [d for d in found.details if "epoch start" in d]


def test_one_answer_per_machine_model_and_device_naming_several_backends():
    cells = grid() + [c | {"device": "cpu"} for c in grid()]
    # jax twice as fast, its cells timed tightly enough to beat the best of 8 against 8.
    cells += [c | {"backend": "jax", "ms_per_step": 0.5 * c["ms_per_step"], "ms_per_step_log_se":
                   0.002, "images_per_sec": 2 * c["images_per_sec"]} for c in grid()]
    found = answers(summary_of(cells))
    assert [a.where for a in found] == [("m1", "seed_convnet", "cpu"), ("m1", "seed_convnet",
                                                                         "gpu0")]
    assert found[1].lead.startswith("seed_convnet on gpu0: Use mixed_bfloat16 at batch 256 on "
                                    "jax: ")
    assert "float32's best, at batch 128 on jax: 711 images/s." in found[1].details[0]
    assert found[0].lead.startswith("seed_convnet on cpu: Use mixed_bfloat16 at batch 256: ")


def test_a_run_records_whole_run_reaches_the_answer_and_headline_opens_with_the_lead():
    summary = summarise([record("float32", 400.0), record("mixed_bfloat16", 250.0)])
    # 9469 // 32 = 295 steps an epoch, 5 epochs at 400 ms: 9.8 min; at 250 ms 6.1 min. Each
    # process's ratio is 1.60x: an interval of no width.
    [found] = answers(summary)
    assert found.lead == (
        "seed_convnet on cpu: Use mixed_bfloat16 at batch 32: 1.60× float32's best "
        "(1.60–1.60); 5 epochs: 9.8 min → 6.1 min; parity not checked."
    )
    lines = headline_lines(summary)
    assert lines[0] == found.lead
    assert lines[1:1 + len(found.details)] == [f"  {d}" for d in found.details]
    assert lines[1] == "  mixed_bfloat16 at batch 32: 128 images/s; float32's best, at batch 32: " \
        "80 images/s."


def test_the_report_page_opens_with_the_lead_as_its_answer_then_the_details():
    records = [record("float32", 400.0), record("mixed_bfloat16", 250.0)]
    summary = summarise(records)
    page = render_html(summary, load_published(), breakdown_table(records))
    [found] = answers(summary)
    opening = page.split("<h1>", 1)[1]
    lead = f'<p class="lead">{markupsafe.escape(found.lead)}</p>'
    assert opening.index('<section class="answer" id="answer">') < opening.index(lead)
    assert opening.index(lead) < opening.index(str(markupsafe.escape(found.details[0])))
    assert opening.index(lead) < opening.index(str(markupsafe.escape(HOW_TO_READ[:60])))
    assert "<b>" not in opening.split("</section>", 1)[0]  # the answer, not a bold paragraph


def test_slower_where_the_processes_were_shared_is_said_once_in_the_lead():
    found = _answer(noisy_grid({32: 0.5, 64: 0.9, 128: 0.95, 256: 1.05}))
    assert found.lead == (
        "seed_convnet on gpu0: Keep float32: mixed_bfloat16 is slower, 0.50× float32 at batch "
        "32, paired (0.44–0.56); 20 epochs with validation: 4.7 h."
    )
    said = " ".join(found.details)
    assert "no measurable difference" not in said and "runs 0.50×" not in said
    assert "mixed_bfloat16 at batch 256 against float32's best, at batch 32: 1.01×" in said


def test_too_few_processes_show_no_interval_for_the_ratio_anywhere():
    cells = two_processes("mixed_bfloat16", 1.02, 0.05, 0.05)
    cells[-1] |= {"ms_per_step": 500.0, "images_per_sec": 256_000 / 500}
    found = _answer(cells)
    assert found.lead.startswith("seed_convnet on gpu0: Keep float32: too few processes to "
                                 "tell mixed_bfloat16 (1.44×) from it; ")
    assert not any("widened" in d or "paired in the same" in d for d in found.details)


def _several_machines_and_backends():
    cells = grid() + [c | {"machine": "m2"} for c in grid()]
    return cells + [c | {"backend": "jax", "variant": "xla"} for c in cells]


ONE_PLACE = {
    "use": grid(), "use-paired": noisy_grid(GRID_SPEEDUP),
    "fastest-does-not-fit": grid(b256={"fits_at_batch": False}),
    "keep-paired": noisy_grid({32: 0.5, 64: 0.9, 128: 0.95, 256: 1.05}),
    "baseline-only": [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()],
    "no-baseline": [cell("mixed_bfloat16", b, ms) for b, ms in FLOAT32_MS.items()],
    "keep": [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    + [cell("mixed_float16", b, 2 * ms) for b, ms in FLOAT32_MS.items()],
    "no-interval": [c | {"ms_per_step_log_se": None} for c in grid()],
}


@pytest.mark.parametrize(("cells", "most"), [
    *((cells, 25) for cells in ONE_PLACE.values()),
    # the machine, backend and variant named as well: 3 words more
    (_several_machines_and_backends(), 28),
], ids=[*ONE_PLACE, "machines-and-backends"])
def test_every_lead_as_printed_is_at_most_about_25_words(cells, most):
    for found in answers(summary_of(cells)):  # the whole line, "where" and all; · and → no words
        words = [w for w in found.lead.split() if w not in ("·", "→")]
        # "; parity not checked": a caveat the lead may not leave out, 3 words more
        assert len(words) <= most + 3 * ("parity not checked" in found.lead), found.lead


def test_a_time_said_after_another_is_in_no_larger_a_unit_and_a_missing_source_unsaid():
    cells = grid()
    for c in cells:  # float32's best (batch 128) 119 s; mixed_bfloat16's (256) 125 s
        c |= {"fullrun_s": 119.0 if c["policy"] == "float32" else 125.0,
              "fullrun_s_ci_low": None, "fullrun_source": None}
    found = _answer(cells)
    assert found.lead.endswith("; 20 epochs with validation: 119 s → 125 s; parity not checked.")
    assert ("20 epochs of imagenette2-320 with validation after each: float32 at batch 128 "
            "119 s, mixed_bfloat16 at batch 256 125 s.") in found.details


def test_cells_of_one_process_give_no_verdict_and_say_why():
    cells = [c | {"ms_per_step_log_se": None, "speedup_log_se": None} for c in grid()]
    cells = [c | {"ms_per_step": 4 * c["ms_per_step"], "images_per_sec": c["images_per_sec"] / 4,
                  "speedup_vs_baseline": 0.5} if c["policy"] != "float32" else c for c in cells]
    found = _answer(cells)
    assert found.lead == (
        "seed_convnet on gpu0: No verdict: mixed_bfloat16 at batch 256 runs 0.58× float32's "
        "best, with no interval to judge by; 20 epochs with validation: 14 min → 6.2 min."
    )


@pytest.mark.parametrize("epochs, said", [(1, "1 epoch with validation"),
                                          (20, "20 epochs with validation")])
def test_the_whole_run_is_named_in_words(epochs, said):
    import pandas as pd

    from mptbench.report.answer import run_words

    rows = pd.DataFrame([{"fullrun_epochs": epochs, "fullrun_validates": True}])
    assert run_words(rows) == said
