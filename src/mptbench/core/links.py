"""Where the MLflow UI shows an experiment or a run: the report links each run there and a
finished workflow prints the experiment's page; and the names the job side logs under, which
the report reads back when it merges an MLflow store's runs."""

from __future__ import annotations

SWEEP_TAG = "mptbench.sweep"  # the tag of an experiment's parent run (the sweep)
CELL_TAG = "mptbench.cell"
RECORD_ARTIFACT = "run_record.json"  # each cell run's own copy of its run record


def experiment_link(ui_url: str, experiment_id, page: str = "") -> str:
    """A page of the MLflow UI. MLflow 3.17's UI picks its view (GenAI or model training)
    from a switch it remembers per browser, not from the experiment's kind tag: the link
    asks for the model-training view itself."""
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}{page}?workflowType=machine_learning"
