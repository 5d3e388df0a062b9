"""What each instruction-set generation buys, as the report's variants section words it."""

from answer_cases import cell, summary_of

from mptbench.report.variants import variants_section

GENERATIONS = {  # variant: (cap, kernels built for, mixed_bfloat16's ms against float32's 100)
    "isa_avx2": ("AVX2", "avx2", None),
    "isa_avx512_core": ("AVX512_CORE", "avx512_core", 357.0),
    "isa_avx512_core_bf16": ("AVX512_CORE_BF16", "avx512_core_bf16", 118.0),
    "pypi": (None, "avx10_1_512_amx", 34.5),
}
REFUSED = "oneDNN: could not create a primitive descriptor for the convolution forward " \
          "propagation primitive"


def cells(built_for: dict[str, str] | None = None) -> list[dict]:
    found = []
    for variant, (cap, kernels, ms) in GENERATIONS.items():
        facts = {"variant": variant, "device": "cpu", "isa_cap": cap, "onednn": "on",
                 "kernel_isa": (built_for or {}).get(variant, kernels)}
        found.append(cell("float32", 32, 100.0, **facts))
        if ms is None:
            found.append(cell("mixed_bfloat16", 32, 100.0, **facts, outcome="unsupported",
                              reason=REFUSED, ms_per_step=None))
        else:
            speedup = 100.0 / ms
            found.append(cell("mixed_bfloat16", 32, ms, **facts, matmul_peak_vs_float32=speedup,
                              speedup_ci_low=speedup / 1.05, speedup_ci_high=speedup * 1.05))
    return found


def test_each_generation_s_speedup_is_listed_in_order_and_the_deciding_step_named():
    section = variants_section(summary_of(cells()))
    [found] = section["generations"]
    assert found["title"] == "seed_convnet on cpu of m1 · tensorflow"
    assert [row[0]["text"] for row in found["table"]["rows"]] == list(GENERATIONS)
    [sentence] = found["sentences"]
    # Each generation's figure in order, where it first runs, and the step that decides.
    listed, first, decides = sentence.split(". ", 2)
    shown = [f"unsupported ({REFUSED}) at AVX2", "0.28× (0.27–0.29) at AVX512_CORE",
             "0.85× (0.81–0.89) at AVX512_CORE_BF16", "2.90× (2.76–3.04) at no cap"]
    assert [listed.index(x) for x in shown] == sorted(listed.index(x) for x in shown)
    assert first.endswith("AVX512_CORE")
    assert "no cap" in decides and "from 0.85×" in decides and "to 2.90×" in decides
    assert section["warnings"] == []


def test_a_cap_that_did_not_take_is_flagged_and_not_read_as_its_generation():
    summary = summary_of(cells({"isa_avx512_core": "avx10_1_512_amx"}))
    summary["kernel_above_cap"] = summary["variant"] == "isa_avx512_core"
    section = variants_section(summary)
    [warning] = section["warnings"]
    assert warning.startswith("variant isa_avx512_core:")
    assert "avx10_1_512_amx" in warning and "above its cap AVX512_CORE" in warning
    [found] = section["generations"]
    flagged = [row[2] for row in found["table"]["rows"] if row[2]["css"] == "fail"]
    assert [c["text"] for c in flagged] == ["avx10_1_512_amx"]


def test_each_cap_gets_an_answer_of_its_own_and_what_it_cannot_run_is_said_with_why():
    """A cap is a generation of CPU, not a setting to choose: no answer picks one cap's cell
    over another's."""
    from mptbench.report.answer import answers

    found = {a.where[2]: a for a in answers(summary_of(cells()))}
    assert sorted(found) == ["cpu", "cpu.isa_AVX2", "cpu.isa_AVX512_CORE",
                             "cpu.isa_AVX512_CORE_BF16"]
    avx2 = found["cpu.isa_AVX2"]
    assert avx2.lead.startswith("seed_convnet on cpu, kernels capped at AVX2: Keep float32")
    assert f"Unsupported here: mixed_bfloat16 ({REFUSED})." in avx2.details
    uncapped = found["cpu"]
    assert uncapped.lead.startswith("seed_convnet on cpu: Use mixed_bfloat16 at batch 32: 2.90×")


def test_a_step_within_the_intervals_decides_nothing():
    from mptbench.report.variants import Figure, Generation, turns_on

    where = [Generation(4, "AVX512_BF16", "AVX512_CORE_BF16"), Generation(5, "AMX", "no cap")]
    figures = [Figure(where[0], 0.82, 0.70, 0.95), Figure(where[1], 0.88, 0.54, 1.43)]
    assert turns_on("mixed_bfloat16", "float32", figures).endswith(
        "No generation measurably changes it here (every interval overlaps the next).")


def test_the_headline_counts_an_unsupported_cell_apart_from_the_failed():
    from mptbench.report.headline import lines

    [avx2] = [line for line in lines(summary_of(cells())) if "isa_avx2" in line]
    assert avx2.endswith(": 1 of 2 cells ran, 0 over budget, 0 failed, 1 unsupported here")
