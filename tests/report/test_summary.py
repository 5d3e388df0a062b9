"""The peak a cell is held to, its MFU, and speedups with their intervals over processes."""

import numpy as np
import pandas as pd
import pytest
from records import record as make_record
from records import unmeasured_record

from mptbench.core import stats
from mptbench.core.contract import ArmResult
from mptbench.jobs.combine import combine
from mptbench.report.summary import VALUE_OF, estimate_of, peaks, summarise

CALIBRATION = {
    "matmul": {"float32": {"tflops": 2.0}, "bfloat16": {"tflops": 6.0}},
    "conv": {"float32": {"tflops": 1.0}, "bfloat16": {"tflops": 2.5}},
    "matmul_vs_float32": {"float32": 1.0, "bfloat16": 3.0},
    "conv_vs_float32": {"float32": 1.0, "bfloat16": 2.5},
}


def test_the_peak_weighs_conv_flops_at_the_conv_peak_and_dense_at_the_matmul_peak():
    row = {"conv_flops_per_step": 3e12, "matmul_flops_per_step": 1e12, "achieved_tflops": 0.8}
    out = peaks(CALIBRATION, "float32", row)
    # 3 TFLOP at 1 TFLOP/s and 1 TFLOP at 2 TFLOP/s: 4 TFLOP in 3.5 s.
    assert out["peak_tflops"] == pytest.approx(4 / 3.5)
    assert out["mfu"] == pytest.approx(0.8 / (4 / 3.5))
    assert out["conv_peak_vs_float32"] == 1.0
    assert peaks(CALIBRATION, "bfloat16", row)["peak_tflops"] == pytest.approx(
        4 / (3 / 2.5 + 1 / 6)
    )
    assert peaks(CALIBRATION, "unknown", row) == {}


def test_a_cell_above_its_peak_gets_no_mfu_but_a_note():
    row = {"conv_flops_per_step": 1e12, "matmul_flops_per_step": 0, "achieved_tflops": 0.9,
           "achieved_tflops_compute": 1.4}
    out = peaks(CALIBRATION, "float32", row)
    assert out["mfu"] is None and out["mfu_compute"] is None
    assert out["peak_note"].startswith("calibration too low: this cell reached 1.4 TFLOP/s")


def _record(policy, batch_size, processes, twins=None, dtype="float32", baseline=None):
    """A record timed in `processes` ({process id: steps in ms}), each step its own round."""
    repeats = []
    for i, (process, steps) in enumerate(processes.items()):
        twin = (twins or {}).get(process, [])
        repeats.append({
            "repeat": i + 1, "process": process, "outcome": "ok", "step_ms": steps,
            "rounds": list(range(len(steps))), "synthetic_step_ms": twin,
            "synthetic_rounds": list(range(len(twin))),
        })
    medians = [sorted(s)[len(s) // 2] for s in processes.values()]
    return make_record(
        model="m", policy=policy, batch_size=batch_size,
        ms_per_step=sorted(medians)[len(medians) // 2], compute_dtype=dtype,
        baseline=dtype == "float32" if baseline is None else baseline, repeats=repeats,
    )


# Three processes, each slower or faster as a whole (what a process does to every policy in it).
LEVELS = {"p1": 1.00, "p2": 1.08, "p3": 0.95}


def _steps(scale: float, ripple: int = 1) -> dict[str, list[float]]:
    """Each process's six steps (one a round) at its level; `ripple` varies them a little."""
    return {p: [100.0 * level * scale * (1 + 0.002 * (k * ripple % 6)) for k in range(6)]
            for p, level in LEVELS.items()}


def test_speedups_pair_the_processes_both_ran_in_end_to_end_and_compute_only():
    records = [
        _record("fp32", 8, _steps(1), twins=_steps(1), baseline=True),
        _record("mixed_bfloat16", 8, _steps(1 / 2, 5), twins=_steps(1 / 3, 5), dtype="bfloat16"),
    ]
    summary = summarise(records).set_index("policy")
    row = summary.loc["mixed_bfloat16"]
    assert row["speedup_vs_baseline"] == pytest.approx(2.0, rel=1e-3)
    # The 8% between processes falls on both and cancels: a narrow interval over 3 processes.
    assert row["speedup_ci_low"] < 2.0 < row["speedup_ci_high"] < 2.01
    assert row["speedup_processes"] == 3 and row["speedup_paired"]
    assert row["speedup_verdict"] == "faster"
    assert row["speedup_compute"] == pytest.approx(3.0, rel=1e-3)
    assert row["speedup_compute_ci_low"] > row["speedup_ci_high"]
    assert summary.loc["fp32", "speedup_vs_baseline"] == 1.0  # a baseline of another name


def test_cells_timed_in_different_processes_keep_the_spread_between_them():
    records = [
        _record("float32", 8, _steps(1)),
        _record(
            "mixed_bfloat16",
            8,
            {f"other-{p}": s for p, s in _steps(1 / 2).items()},
            dtype="bfloat16",
        ),
    ]
    row = summarise(records).set_index("policy").loc["mixed_bfloat16"]
    assert row["speedup_vs_baseline"] == pytest.approx(2.0) and not row["speedup_paired"]
    assert row["speedup_ci_high"] - row["speedup_ci_low"] > 0.1  # Welch, over processes


def test_a_change_within_the_noise_is_no_measurable_difference():
    records = [
        _record("float32", 8, _steps(1)),
        _record("float32_copy", 8, _steps(1 / 1.003), baseline=False),
    ]
    row = summarise(records).set_index("policy").loc["float32_copy"]
    assert row["speedup_ci_low"] > 1  # the interval alone would call it faster
    assert row["speedup_verdict"] == "no measurable difference"


def test_a_speedup_timed_in_added_processes_keeps_its_first_stages_spread():
    """Stein's interval, as the train job judged it: 3 processes planned (train.repeats), 2
    more added for precision; the spread and degrees of freedom are the first 3's, the mean
    is over all 5. Read from all 5 instead, the quiet last two would narrow it."""
    import math

    from mptbench.core import stats

    ratios = {"p1": 1.10, "p2": 0.95, "p3": 1.04, "p4": 1.01, "p5": 1.01}
    base = {p: [100.0] * 4 for p in ratios}
    mine = {p: [100.0 / r] * 4 for p, r in ratios.items()}
    records = [_record("float32", 8, base), _record("mixed_bfloat16", 8, mine, dtype="bfloat16")]
    for record in records:
        record["config"] = {"train": {"repeats": 3}}
    row = summarise(records).set_index("policy").loc["mixed_bfloat16"]
    logs = [math.log(r) for r in ratios.values()]
    stein, pooled = stats.of_logs(logs, first=3), stats.of_logs(logs)
    assert row["speedup_ci_low"] == pytest.approx(stein.low)
    assert row["speedup_ci_high"] == pytest.approx(stein.high)
    assert stein.high - stein.low > pooled.high - pooled.low
    assert row["speedup_processes"] == 5


def test_a_calibration_measured_on_other_hardware_holds_the_cell_to_nothing():
    record = _record("float32", 8, {"p1": [10.0, 10.0], "p2": [11.0, 11.0], "p3": [9.0, 9.0]})
    record |= {"machine": "v100", "achieved_tflops": 0.5, "conv_flops_per_step": 1e12,
               "matmul_flops_per_step": 0}
    record["hardware"] = {"id": "tesla-v100-sxm2-16gb", "host": "n1"}
    key = ("v100", "tensorflow", "pypi", "cpu")
    elsewhere = CALIBRATION | {"hardware": {"id": "nvidia-a100-sxm4-80gb", "host": "n2"}}
    [row] = summarise([record], {key: elsewhere}).to_dict("records")
    assert row["machine"] == "v100" and row["mfu"] != row["mfu"]  # NaN: no MFU
    assert row["peak_note"].startswith("this cell ran on tesla-v100-sxm2-16gb (host n1), but its "
                                       "calibration ran on nvidia-a100-sxm4-80gb")
    same = CALIBRATION | {"hardware": {"id": "tesla-v100-sxm2-16gb", "host": "n3"}}
    [row] = summarise([record], {key: same}).to_dict("records")
    assert row["mfu"] == pytest.approx(0.5)


def _timed(repeat: int, steps: list[float], twin: list[float], host_ms: float = 10.0) -> ArmResult:
    """One process's arm, each step (in s) its own round, its twin's likewise; a compiling
    warm-up step and validation batches a third of a step, the first compiling too; two
    epoch starts, both waited in even processes, one in odd ones."""
    return ArmResult(
        repeat=repeat,
        policy="p",
        fingerprint={},
        outcome="ok",
        step_s=steps,
        rounds=list(range(len(steps))),
        synthetic_step_s=twin,
        synthetic_rounds=list(range(len(twin))),
        process=f"p{repeat}",
        stopped_by="steps",
        warmup_s=[steps[0] + 2.0],
        validation_first_s=steps[0] / 3 + 1.0,
        validation_s=[s / 3 for s in steps[:3]],
        measured={"host_ms": host_ms},
        epoch_starts=[{"lived_s": 1.5, "wait_s": 0.6},
                      {"lived_s": 1.5, "wait_s": 0.0 if repeat % 2 else 0.6}],
    )


def _combined(policy: str, dtype: str, scale: float, compute: float, slow: float = 1.0) -> dict:
    """A cell as the train job records it (combine), in 5 processes after a first stage of 3,
    each process a little slower or faster as a whole, its twin `compute` of its step; the
    host's kernel `slow` times its fastest (10 ms) in every process."""
    levels = [1.00, 1.08, 0.95, 1.02, 0.99]
    repeats = [
        _timed(
            i,
            [scale * level * (1 + 0.01 * ((k * (i + 1)) % 4)) for k in range(6)],
            [compute * scale * level * (1 + 0.02 * ((k + i) % 3)) for k in range(6)],
            10.0 * slow * level,
        )
        for i, level in enumerate(levels)
    ]
    record = unmeasured_record(
        model="m", policy=policy, batch_size=8, compute_dtype=dtype, train_examples=800,
        validation_examples=200, config={"train": {"repeats": 3, "epochs": 1}},
    )
    combine(record, repeats, batch_size=8, fastest_host_ms=9.5)
    return record


def test_every_interval_in_summary_csv_is_recomputed_from_its_own_columns(tmp_path):
    """value·exp(±(t·log_se + host_widening)), t the 95% quantile at the CSV's degrees of
    freedom: every *_ci_low/*_ci_high pair the CSV prints, from the CSV alone; one cell
    widened for a host that ran 1.5x slower than its fastest in all its processes."""
    records = [
        _combined("float32", "float32", 0.1, 0.8),
        _combined("mixed_bfloat16", "bfloat16", 0.06, 0.5, slow=1.5),
    ]
    summarise(records).to_csv(tmp_path / "summary.csv", index=False)
    csv = pd.read_csv(tmp_path / "summary.csv")
    prefixes = [c.removesuffix("_ci_low") for c in csv.columns if c.endswith("_ci_low")]
    assert {"ms_per_step", "speedup", "speedup_compute", "input_bound_ratio", "fullrun_s",
            "fullrun_speedup", "validation_ms_per_batch", "fullrun_epoch_starts_s"} <= set(prefixes)
    assert (csv["host_widening"] > 0).tolist() == [False, True]
    for prefix in prefixes:
        recipe = [VALUE_OF.get(prefix, prefix), *(f"{prefix}_{c}" for c in ("log_se", "df"))]
        missing = [c for c in [f"{prefix}_ci_high", *recipe] if c not in csv.columns]
        assert not missing, f"{prefix}'s interval has no recipe: no {missing} in summary.csv"
        shown = csv.dropna(subset=[f"{prefix}_ci_low"])
        assert len(shown), f"no row shows {prefix}'s interval: the test covers nothing of it"
        value, log_se, df = (shown[c].to_numpy() for c in recipe)
        widening = shown["host_widening"].fillna(0).to_numpy()
        half = np.array([stats.t_quantile(0.95, int(d)) for d in df]) * log_se + widening
        assert shown[f"{prefix}_ci_low"].tolist() == pytest.approx(value * np.exp(-half))
        assert shown[f"{prefix}_ci_high"].tolist() == pytest.approx(value * np.exp(half))
        # The one estimate of a row every reader builds (the answer, the headline) is it.
        rebuilt = [estimate_of(row, prefix) for _, row in shown.iterrows()]
        assert [e.low for e in rebuilt] == pytest.approx(shown[f"{prefix}_ci_low"].tolist())
        assert [e.high for e in rebuilt] == pytest.approx(shown[f"{prefix}_ci_high"].tolist())
    # Under Stein's procedure the speedup's degrees of freedom are the first stage's 3 less one.
    assert csv.set_index("policy").loc["mixed_bfloat16", "speedup_df"] == 2


def test_the_whole_runs_speedup_pairs_each_process_whole_run():
    """Per process the baseline's whole run over the policy's (both timed in it), over
    processes: 2.0, 2.2 and 1.8 give their geometric mean, not the ratio of the cells'."""
    import math

    records = [_combined("float32", "float32", 0.1, 0.8),
               _combined("mixed_bfloat16", "bfloat16", 0.06, 0.5)]
    for ratio, base, mine in zip((2.0, 2.2, 1.8, 2.0, 2.0), records[0]["repeats"],
                                 records[1]["repeats"], strict=True):
        mine["fullrun_s"] = base["fullrun_s"] / ratio
    row = summarise(records).set_index("policy").loc["mixed_bfloat16"]
    assert row["fullrun_speedup"] == pytest.approx(math.exp(sum(
        math.log(r) for r in (2.0, 2.2, 1.8, 2.0, 2.0)) / 5))
    assert row["fullrun_speedup_df"] == 2 and row["fullrun_speedup_ci_low"] < 2.0
