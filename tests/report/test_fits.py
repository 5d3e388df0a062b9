"""The report's "What fits": one sentence per policy from the searches, the published card
beside it."""

from mptbench.report.fits import fits_sections, sentence
from mptbench.report.published import load_published


def _search(policy, largest, failed, baseline=False, limit="device.gpu.fits_search_mb=4096"):
    tries = [{"batch_size": b, "outcome": "ok", "peak_mb": b * 10.0, "peak_source": "x"}
             for b in (32, 64, 128, 256, 512) if b <= largest]
    if failed:
        tries.append({"batch_size": failed, "outcome": "oom", "reason": "OOM", "peak_mb": None})
    return {"model": "m", "backend": "tensorflow", "variant": "pypi", "device": "gpu0",
            "policy": policy, "baseline": baseline, "compute_dtype": "float16",
            "largest_fit": largest, "smallest_failed": failed, "memory_limit": limit,
            "stopped_by": "within 10%", "tries": tries, "max_batch": 512}


def test_a_policy_that_fits_a_larger_batch_says_so_with_the_limit():
    base = _search("float32", 256, 280, baseline=True)
    said = sentence(_search("mixed_float16", 512, 560), base)
    assert "batch 512 where float32 fits 256" in said and "fits_search_mb=4096" in said
    assert "fits only batch 128 where float32 fits 256" in sentence(
        _search("mixed_bfloat16", 128, 140), base
    )
    both = sentence(_search("mixed_float16", 512, None), _search("float32", 512, None, True))
    assert "both fit every batch tried, up to 512" in both and "did not decide" in both
    stopped = _search("mixed_float16", 64, None) | {"stopped_by": "batch 128 not tried: slow"}
    said = sentence(stopped, _search("float32", 512, None, True))
    assert "up to 64" in said and "batch 128 not tried: slow" in said and "not known" in said


def test_the_section_has_peaks_with_their_ratio_and_the_published_card():
    found = fits_sections(
        [_search("mixed_float16", 512, 560), _search("float32", 256, 280, baseline=True)],
        load_published(),
    )
    (group,) = found["groups"]
    assert group["title"] == "local · m · tensorflow · pypi · gpu0"
    assert group["table"]["rows"][0][0]["text"] == "float32"  # the baseline first
    peaks = {row[0]["text"]: row for row in group["peaks"]["rows"]}
    assert peaks[256][2]["text"] == "2560" and peaks[256][2]["small"] == "1.00× float32"
    assert peaks[280][1]["text"] == "oom"
    published = found["published"]
    assert "Quadro M2200" in published and "batch 256 where float32 fit 128" in published


def test_a_cpu_peak_names_its_source_and_what_its_cgroup_counted():
    """The peak is the trainer's own (VmHWM); what its cgroup's limit counted, page cache
    included, is said beside it, not put in its place."""
    search = _search("float32", 64, None, baseline=True)
    for tried in search["tries"]:
        tried["peak_source"] = "VmHWM"
    search["tries"][0]["limit_counted_mb"] = 543.4
    (group,) = fits_sections([search], load_published())["groups"]
    peaks = {row[0]["text"]: row[1] for row in group["peaks"]["rows"]}
    assert peaks[32]["text"] == "320"
    assert peaks[32]["title"] == "VmHWM; its cgroup counted 543 MB, page cache included"
    assert peaks[64]["title"] == "VmHWM"  # none counted: no cgroup of its own
