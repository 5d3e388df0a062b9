"""The diagnosis' sentences about how far a device's figures can be trusted."""

import pandas as pd
import pytest
from records import summary_row

from mptbench.report.diagnosis import stolen_sentence
from mptbench.report.thresholds import STOLEN_NOTABLE


def _cells(stolen: list[float | None]) -> pd.DataFrame:
    """float32 and mixed_bfloat16 at batch 32, then at 64: as many as `stolen` has figures."""
    cells = [("float32", 32), ("mixed_bfloat16", 32), ("float32", 64), ("mixed_bfloat16", 64)]
    return pd.DataFrame([
        summary_row(policy=policy, batch_size=batch, cpu_stolen_pct_most=most)
        for (policy, batch), most in zip(cells, stolen, strict=False)
    ])


def test_cells_whose_processes_lost_cpu_to_the_hypervisor_are_named_with_the_most_lost():
    said = stolen_sentence(_cells([0.4, 31.2, STOLEN_NOTABLE, 1.0]))
    assert "31%" in said and "(cpu_stolen_pct_most)" in said
    # The cells that lost at least the notable share are named; the others are not.
    assert "float32 at batch 64" in said and "mixed_bfloat16 at batch 32" in said
    assert "mixed_bfloat16 at batch 64" not in said and "float32 at batch 32" not in said


@pytest.mark.parametrize("stolen", [[0.0, 4.9, 1.0, 0.2], [None, None, None, None]])
def test_a_quiet_host_or_one_that_could_not_tell_gets_no_sentence(stolen):
    assert stolen_sentence(_cells(stolen)) is None
    assert stolen_sentence(_cells(stolen).drop(columns="cpu_stolen_pct_most")) is None
