"""The search for the largest batch that fits: the grid's batch sizes, doubling, bisection;
only out of memory means "does not fit"."""

import json
import sys

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import FitResult
from mptbench.jobs.fits import cell_memory, search, what_fits
from mptbench.jobs.memory import own_cgroup


def _machine(largest: int, calls: list[int] | None = None, other: dict | None = None):
    """A device on which every batch up to `largest` fits (peak 10 MB per image)."""

    def attempt(batch):
        if calls is not None:
            calls.append(batch)
        if other and batch in other:
            return FitResult(batch, other[batch], "it died")
        if batch <= largest:
            return FitResult(batch, "ok", None, 100 + 10 * batch, "VmHWM", [0.1, 0.1])
        return FitResult(batch, "oom", "ResourceExhaustedError: OOM when allocating")

    return attempt


def test_the_grid_then_bisection_to_within_ten_percent():
    calls = []
    found = search(_machine(300, calls), [32, 64, 128, 256, 512], cap=512)
    assert calls[:5] == [32, 64, 128, 256, 512]  # every cell's own peak first
    assert found.largest_fit <= 300 < found.smallest_failed
    assert found.smallest_failed <= 1.1 * found.largest_fit + 1
    assert "within 10%" in found.stopped_by
    [at_512] = [t for t in found.tries if t.batch_size == 512]
    assert at_512.outcome == "oom" and "OOM" in at_512.reason


def test_doubling_above_the_grid_up_to_the_cap():
    calls = []
    found = search(_machine(10_000, calls), [32, 64], cap=1000)
    assert calls == [32, 64, 128, 256, 512, 1000]
    assert found.largest_fit == 1000 and found.smallest_failed is None
    assert "up to the cap" in found.stopped_by


def test_halving_below_the_grid_when_even_its_smallest_does_not_fit():
    found = search(_machine(5), [32, 64], cap=64)
    assert found.largest_fit == 5 and found.smallest_failed == 6
    assert [t.batch_size for t in found.tries][:4] == [32, 16, 8, 4]
    nothing = search(_machine(0), [4], cap=4)
    assert nothing.largest_fit is None and nothing.stopped_by == "not even batch 1 fit"


def test_only_out_of_memory_means_it_does_not_fit():
    found = search(_machine(1000, other={64: "crashed"}), [32, 64, 128], cap=128)
    assert found.largest_fit == 32 and found.smallest_failed is None
    assert found.stopped_by == "batch 64 ended crashed: it died"
    assert [t.batch_size for t in found.tries] == [32, 64]


def test_a_batch_over_the_step_budget_is_not_tried_and_the_search_says_so():
    found = search(_machine(1000), [32, 64, 128], cap=128,
                   skip=lambda b: "predicted 30 s/step" if b >= 64 else None)
    assert [t.batch_size for t in found.tries] == [32]
    assert found.stopped_by == "batch 64 not tried: predicted 30 s/step"


@pytest.mark.parametrize("batch, peak", [(32, 420.0), (512, None)])
def test_a_cell_keeps_its_own_batch_sizes_peak(batch, peak):
    found = search(_machine(300), [32, 64, 128, 256, 512], cap=512)
    fits = {"tries": [vars(t) for t in found.tries], "largest_fit": found.largest_fit,
            "fits_search_mb": 1536}
    figures = cell_memory(fits, batch)
    assert figures.get("peak_memory_mb") == peak
    if peak:
        assert figures["peak_memory_source"] == "VmHWM"
    assert figures["fits_at_batch"] is (peak is not None)
    assert figures["largest_fit_batch"] == found.largest_fit and figures["fits_search_mb"] == 1536


def _prepared(tmp_path, image_size):
    """What a fit try reads of the prepared data: its image size and classes (it trains on
    random in-memory data)."""
    path = tmp_path / "prepared.json"
    path.write_text(json.dumps({"image_size": image_size, "classes": [f"c{i}" for i in range(10)],
                                "dataset": "random"}))
    return str(path)


@pytest.mark.slow
@pytest.mark.skipif(own_cgroup() is None, reason="no memory cgroup to limit a trainer in here")
def test_under_a_small_limit_the_search_finds_a_finite_largest_batch_with_oom_above(tmp_path):
    # One policy: the search is the same for every one (the smoke compares their memory), and
    # float32 is fast on every CPU (bfloat16 is emulated, and slow, without AVX512_BF16).
    run = smoke_cell_run(batch_size=16)
    out = tmp_path / "float32.json"
    found = what_fits(sys.executable, run, _prepared(tmp_path, 128), str(out), [64],
                      cap=2048, steps=2, limit_mb=1024)
    assert json.loads(out.read_text()) == found
    largest, failed = found["largest_fit"], found["smallest_failed"]
    assert largest and failed and largest < failed <= 1.1 * largest + 1, found["stopped_by"]
    tries = {t["batch_size"]: t for t in found["tries"]}
    assert tries[largest]["outcome"] == "ok"
    # What the limit counted of the largest fit is under it; the peak is the trainer's own.
    assert tries[largest]["limit_counted_mb"] <= 1024 and tries[largest]["peak_source"] == "VmHWM"
    # Above it: the kernel's OOM kill of the trainer's own cgroup, named.
    assert tries[failed]["outcome"] == "oom" and "oom_kill" in tries[failed]["reason"]
    assert tries[failed]["reason"].endswith("the limit device.cpu.fits_search_mb=1024)")
    assert found["memory_limit"] == "device.cpu.fits_search_mb=1024"
    # A larger batch takes more, every batch that fit: the resident peak has no page cache in
    # it (the cgroup's count had: 638 MB at batch 32, 543 at 64, in one run). Close under the
    # limit two batches a few images apart can read in either order (1,377 MB, then 1,358 at the
    # next batch up, in one run): within 3% of each other, as no page cache could be.
    peaks = [tries[b]["peak_mb"] for b in sorted(tries) if tries[b]["outcome"] == "ok"]
    assert len(peaks) >= 3 and peaks[-1] > peaks[0], found["tries"]
    steps_up = zip(peaks, peaks[1:], strict=False)
    assert all(later >= 0.97 * earlier for earlier, later in steps_up), found["tries"]
    assert found["fingerprint"]["cpu"]["logical_cores"] >= 1
