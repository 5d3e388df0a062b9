"""Summary rows and run records the answer's tests choose among and word: a grid of two
policies on a GPU, the default grid's noisy baseline on a CPU, a run record of 3 processes."""

import pandas as pd
from records import record as make_record
from records import summary_row

from mptbench.core import stats
from mptbench.core.record import COLUMNS, FIELDS
from mptbench.report.summary import CELL_KEYS

# float32's and mixed_bfloat16's mean step (ms) per batch size on one GPU: bfloat16's best
# speedup is at batch 32 (100/40 = 2.5x), its most images per second at batch 256 (826/s).
FLOAT32_MS = {32: 100.0, 64: 190.0, 128: 360.0, 256: 760.0}
BFLOAT16_MS = {32: 40.0, 64: 90.0, 128: 170.0, 256: 310.0}
SPEEDUP_LOG_SE = 0.005  # paired: far narrower than either cell's own spread
# What a cell's row says of comparisons it has not made: none.
UNCOMPARED = dict.fromkeys(
    [c for c in COLUMNS if c.startswith(("speedup", "fullrun_speedup"))], None)
NOT_SEARCHED = dict.fromkeys(
    ["peak_memory_mb", "peak_memory_source", "memory_vs_baseline", "fits_at_batch",
     "largest_fit_batch", "fits_search_mb"], None)
NO_PARITY = dict.fromkeys([c for c in COLUMNS if c.startswith("parity_")], None)


def cell(policy: str, batch: int, ms: float, se: float = 0.01, **more) -> dict:
    """A summary row of an ok cell timed in 3 processes on a GPU, its interval ±5% of its mean
    step; its whole run the 2020 experiment's (20 epochs with validation after each) on 12800
    images, the steps' time and a fifth more for validation and the first epoch, ±5% too; no
    speedup (summary_of works it out), no fits search and no parity run unless `more` says so."""
    whole = 1.2 * 20 * (12800 // batch) * ms / 1000
    return summary_row(**{
        "machine": "m1", "model": "seed_convnet", "dataset": "imagenette2-320",
        "image_size": 256, "device": "gpu0", "policy": policy,
        "batch_size": batch, "ms_per_step": ms, "ms_per_step_log_se": se,
        "ms_per_step_ci_low": 0.95 * ms, "ms_per_step_ci_high": 1.05 * ms,
        "train_examples": 12800, "fullrun_s": whole, "fullrun_s_ci_low": 0.95 * whole,
        "fullrun_s_ci_high": 1.05 * whole, "fullrun_epochs": 20, "fullrun_validates": True,
        "fullrun_source": "the 2020 experiment's",
        **UNCOMPARED, **NOT_SEARCHED, **NO_PARITY, **more,
    })


def summary_of(cells: list[dict]) -> pd.DataFrame:
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


def grid(**bfloat16: dict) -> list[dict]:
    """The two policies' cells; `bfloat16` adds columns to its cell at a batch (b256=...)."""
    cells = [cell("float32", b, ms) for b, ms in FLOAT32_MS.items()]
    cells += [
        cell("mixed_bfloat16", b, ms, 0.02, **bfloat16.get(f"b{b}", {}))
        for b, ms in BFLOAT16_MS.items()
    ]
    return cells




def two_processes(policy: str, speedup: float, se: float, speedup_se: float) -> list[dict]:
    """The try-out's cells: float32 and `policy` at `speedup` over it at every batch, each
    cell timed in 2 processes (1 degree of freedom)."""
    cells = [cell("float32", b, ms, se, ms_per_step_df=1) for b, ms in FLOAT32_MS.items()]
    return cells + [
        cell(policy, b, ms / speedup, se, ms_per_step_df=1, speedup_vs_baseline=speedup,
             speedup_log_se=speedup_se, speedup_df=1)
        for b, ms in FLOAT32_MS.items()
    ]


def t_of(estimate: stats.Estimate) -> float:
    return estimate.log_half_width / estimate.log_se


# The default grid on a 2-core AMD EPYC (bench/README.md, bench_grid): mixed_bfloat16 1.73-1.89x
# float32 at every batch, each paired interval about ±5%; float32's three processes at batch 32
# spread 1268-2451 ms (2 degrees of freedom: log_se 0.0766), the rest about ±5%.
GRID_F32_MS = {32: 1763.0, 64: 3620.0, 128: 7300.0, 256: 14600.0}
GRID_SPEEDUP = {32: 1.73, 64: 1.76, 128: 1.81, 256: 1.89}
GRID_F32_SE = {32: 0.0766, 64: 0.01, 128: 0.01, 256: 0.01}


def noisy_grid(speedups: dict[int, float]) -> list[dict]:
    cells = [cell("float32", b, ms, GRID_F32_SE[b]) for b, ms in GRID_F32_MS.items()]
    cells += [
        cell("mixed_bfloat16", b, ms / speedups[b], 0.01, speedup_vs_baseline=speedups[b],
              speedup_log_se=0.019, speedup_df=2)
        for b, ms in GRID_F32_MS.items()
    ]
    return cells


def record(policy: str, ms: float) -> dict:
    """A run record of 3 processes taking turns, 4 rounds each, from a 5-epoch experiment on
    9469 training images."""
    repeats = [
        {"repeat": i + 1, "process": f"p{i}", "outcome": "ok", "rounds": [0, 1, 2, 3],
         "step_ms": [ms * (1 + 0.01 * i)] * 4}
        for i in range(3)
    ]
    return make_record(
        dataset="imagenette2-320", policy=policy, batch_size=32, ms_per_step=ms,
        ms_per_step_log_se=0.006, ms_per_step_ci_low=0.97 * ms, ms_per_step_ci_high=1.03 * ms,
        repeats=repeats, train_examples=9469, config={"train": {"epochs": 5, "repeats": 3}},
        fullrun_s=5 * 295 * ms / 1000, fullrun_epochs=5, fullrun_validates=False,
        fullrun_source="train.epochs",
    )
