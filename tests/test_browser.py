"""The report page and the MLflow UI, opened in a real headless Chromium (Debian's chromium,
driven by Playwright). Screenshots go to the smoke run's results/screenshots/."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
import urllib.request
from pathlib import Path

import pytest
from mlflow_server import MlflowServer
from workflow_helpers import MACHINE, SMOKE_CELLS, SMOKE_PX

pytestmark = [pytest.mark.slow, pytest.mark.workflow]
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no chromium on PATH (.ci/run installs Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def screenshots(smoke_run) -> Path:
    folder = smoke_run[0] / "results" / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _serve(folder: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_report_page_loads_whole_and_fits_the_page(smoke_run, browser, screenshots):
    server = _serve(smoke_run[0] / "results/smoke/report")
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        page.wait_for_load_state("networkidle")
        widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
        # 4 plots and the loss curves for the one model, backend, variant and device, and the
        # published plot.
        assert len(widths) == 6 and all(w > 0 for w in widths), widths
        assert errors == []
        section = page.locator(f"section#{MACHINE}-seed_convnet-tensorflow-pypi-cpu")
        assert section.locator("table").first.locator("tr").count() == 1 + 2  # head, bs4, bs8
        assert section.locator("ul.diagnosis li").count() >= 4
        assert page.locator("table.runs tr").count() == 1 + SMOKE_CELLS
        run_link = page.locator("table.runs a").first.get_attribute("href")
        assert run_link.startswith("http://127.0.0.1:5000/#/experiments/")
        # Nothing wider than the page: the runs table scrolls within its own box.
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
        page.screenshot(path=str(screenshots / "report.png"), full_page=True)
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def mlflow_server(smoke_run):
    """`mlflow server` on 127.0.0.1 over the smoke run's own store."""
    # From the checkout, as a user starts it: the store's artifact paths are relative to it.
    checkout = smoke_run[0]
    with MlflowServer(checkout / "results/mlflow.db", cwd=checkout) as server:
        yield server.url


def _api(url: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{url}/api/2.0/mlflow/{path}", data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def test_the_mlflow_ui_shows_the_sweep_with_its_cells(
    smoke_run, mlflow_server, browser, screenshots
):
    experiment = _api(mlflow_server, "experiments/get-by-name?experiment_name=smoke")["experiment"]
    runs = _api(mlflow_server, "runs/search", {"experiment_ids": [experiment["experiment_id"]]})
    tags = [{t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs["runs"]]
    (parent,) = [r for r, t in zip(runs["runs"], tags, strict=True) if "mptbench.sweep" in t]
    parent_id = parent["info"]["run_id"]
    assert sum(t.get("mlflow.parentRunId") == parent_id for t in tags) == SMOKE_CELLS
    artifacts = _api(mlflow_server, f"artifacts/list?run_id={parent_id}&path=report")
    assert "report/index.html" in {f["path"] for f in artifacts["files"]}

    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    # The link the report and the terminal give: the model-training view, on the runs.
    page.goto(f"{mlflow_server}/#/experiments/{experiment['experiment_id']}"
              "?workflowType=machine_learning")
    sweep = page.locator("[role='row']", has_text="smoke (sweep)")
    sweep.first.wait_for(timeout=60_000)
    assert page.get_by_text(f"smoke:{MACHINE}/").count() == 0  # the cells sit under the sweep
    sweep.locator("button[data-component-id*='runnamecellrenderer']").first.click()
    first = f"smoke:{MACHINE}/seed_convnet/tensorflow/pypi/cpu/float32/bs4"
    page.get_by_text(first).first.wait_for(timeout=60_000)
    cells = f"smoke:{MACHINE}/seed_convnet/tensorflow/pypi/cpu/"
    assert page.get_by_text(cells).count() == SMOKE_CELLS
    assert page.get_by_text(f"imagenette2-320-smoke-{SMOKE_PX}px").count() == SMOKE_CELLS  # dataset
    page.screenshot(path=str(screenshots / "mlflow_experiment.png"), full_page=True)
    page.goto(
        f"{mlflow_server}/#/experiments/{experiment['experiment_id']}/runs/{parent_id}/artifacts"
    )
    page.get_by_text("report").first.wait_for(timeout=60_000)
    page.screenshot(path=str(screenshots / "mlflow_sweep_artifacts.png"), full_page=True)
