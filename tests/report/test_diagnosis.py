"""The diagnosis' sentences about how far a device's figures can be trusted."""

import pandas as pd
import pytest

from mptbench.core.record import COLUMNS
from mptbench.report.diagnosis import stolen_sentence
from mptbench.report.thresholds import STOLEN_NOTABLE


def _cells(stolen: list[float | None]) -> pd.DataFrame:
    frame = pd.DataFrame({
        "policy": ["float32", "mixed_bfloat16", "float32", "mixed_bfloat16"][: len(stolen)],
        "batch_size": [32, 32, 64, 64][: len(stolen)],
        "outcome": "ok",
        "cpu_stolen_pct_most": stolen,
    })
    return frame.reindex(columns=list(dict.fromkeys([*COLUMNS, *frame.columns])))


def test_cells_whose_processes_lost_cpu_to_the_hypervisor_are_named_with_the_most_lost():
    said = stolen_sentence(_cells([0.4, 31.2, STOLEN_NOTABLE, 1.0]))
    assert said.startswith("The hypervisor gave up to 31% of this machine's CPU to other guests")
    assert "while float32 at batch 64; mixed_bfloat16 at batch 32 trained" in said
    assert "(cpu_stolen_pct_most)" in said and "slower than this machine's own" in said


@pytest.mark.parametrize("stolen", [[0.0, 4.9, 1.0, 0.2], [None, None, None, None]])
def test_a_quiet_host_or_one_that_could_not_tell_gets_no_sentence(stolen):
    assert stolen_sentence(_cells(stolen)) is None
    assert stolen_sentence(_cells(stolen).drop(columns="cpu_stolen_pct_most")) is None
