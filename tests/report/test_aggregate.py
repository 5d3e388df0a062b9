"""The report: summary.csv, index.html and plots from synthetic run records, by CLI and library."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from records import record

from mptbench.core.record import REPORT_METRICS
from mptbench.report.aggregate import cell_results
from mptbench.report.aggregate import main as aggregate_main
from mptbench.report.breakdown import breakdown_table
from mptbench.report.diagnosis import diagnose
from mptbench.report.html import render_html
from mptbench.report.published import PUBLISHED_CPU_S_PER_STEP, load_published
from mptbench.report.records import load_records
from mptbench.report.summary import summarise
from mptbench.report.tables import policy_table

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "unit"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

CPU = {
    "model": "Test CPU 9000",
    "logical_cores": 8,
    "flags": ["avx", "avx2", "fma"],
    "fast_bfloat16": False,
    "fast_float16": False,
}
GPU = {"name": "Tesla T4", "compute_capability": 7.5, "fast_float16": True, "fast_bfloat16": False}

# (device, policy, batch_size, outcome, ms_per_step, reason)
CELLS = [
    ("cpu", "float32", 32, "ok", 400.0, None),
    ("cpu", "mixed_float16", 32, "ok", 500.0, None),
    ("cpu", "float32", 64, "ok", 800.0, None),
    ("cpu", "mixed_float16", 64, "ok", 1100.0, None),
    ("cpu", "float32", 128, "over_budget", None, "predicted 12.0 s/step > train.max_step_seconds"),
    ("gpu0", "float32", 32, "ok", 30.0, None),
    ("gpu0", "mixed_float16", 32, "ok", 25.0, None),
    ("gpu0", "float32", 64, "oom", None, "OOM when allocating tensor <shape>"),
    ("gpu0", "mixed_float16", 64, "ok", 48.0, None),
    ("gpu0", "float32", 128, "ok", 60.0, None),
    ("gpu0", "mixed_float16", 128, "ok", 59.0, None),
]


def steps_around(ms: float) -> list[float]:
    """21 steps within +-10% of ms, their median exactly ms."""
    return [round(ms * (1 + d / 100), 6) for d in range(-10, 11)]


# What each of a cell's three processes did to it (their geometric mean 1, so the cell's step
# and its speedups stay exactly the figures of CELLS): the policies of one batch size shared
# the three processes, taking turns, but a process is not kind to both alike.
PROCESS_LEVELS = {"float32": (1.03, 1 / 1.03, 1.0), "mixed_float16": (1.0, 1.02, 1 / 1.02)}


def repeats(device: str, policy: str, batch_size: int, ms: float) -> list[dict]:
    out = []
    for i, level in enumerate(PROCESS_LEVELS[policy]):
        steps = steps_around(ms * level)
        out.append({"repeat": i + 1, "process": f"{device}-{batch_size}-{i}", "outcome": "ok",
                    "step_ms": steps, "rounds": list(range(len(steps)))})
    return out


# What these records leave out: the machine (records from before machines were an axis), a
# fits search, the probe's prediction of a cell that ran.
UNSAID = {"machine": None, "peak_memory_mb": None, "peak_memory_source": None,
          "fits_at_batch": None, "largest_fit_batch": None, "predicted_step_s": None}


def make_record(device, policy, batch_size, outcome, ms_per_step, reason, **more) -> dict:
    """One of CELLS' records; `more` replaces its fields (a fingerprint is merged)."""
    cell = {
        "experiment": EXPERIMENT, "dataset": "imagenette_smoke", "image_size": 64,
        "device": device, "policy": policy, "batch_size": batch_size, "outcome": outcome,
        "reason": reason, "warmup_steps": 2, "mlflow_run_id": f"run-{device}-{policy}-{batch_size}",
        "fingerprint": {"host": "node07", "device": device, "cpu": CPU,
                        "gpu": GPU if device != "cpu" else None, "tensorflow": "2.21.0",
                        "keras": "3.15.1"},
    }
    if outcome == "ok":
        steps = steps_around(ms_per_step)
        cell |= {
            "ms_per_step": ms_per_step, "ms_per_step_median": 0.99 * ms_per_step,
            "ms_per_step_ci_low": 0.97 * ms_per_step, "ms_per_step_ci_high": 1.03 * ms_per_step,
            "ms_per_step_p10": 0.9 * ms_per_step, "ms_per_step_p90": 1.1 * ms_per_step,
            "timed_steps": 3 * len(steps), "timed_samples": 3 * len(steps),
            "final_val_accuracy": 0.5 if policy == "float32" else 0.49,
            "repeats": repeats(device, policy, batch_size, ms_per_step),
        }
    if outcome == "over_budget":
        cell["predicted_step_s"] = 12.0
    cell["fingerprint"] |= more.pop("fingerprint", {})
    return record(**UNSAID | cell | more)


def write_runs(root: Path, cells=CELLS) -> Path:
    runs = root / "results" / EXPERIMENT / "runs"
    for cell in cells:
        device, policy, batch_size = cell[:3]
        path = runs / "pypi" / device / policy / f"bs{batch_size}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(make_record(*cell)))
    return runs


def aggregate(runs: Path, out: Path, cli: bool = False) -> subprocess.CompletedProcess:
    """The report built from `runs` into `out`: in this process (the CLI's own function, its
    output captured), or with `cli` as the workflow calls it, in a process of its own."""
    args = ["--runs", str(runs), "--report-dir", str(out)]
    if cli:
        return subprocess.run([sys.executable, "-m", "mptbench.report.aggregate", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = aggregate_main(args)
    return subprocess.CompletedProcess(args, code, printed.getvalue(), errors.getvalue())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    runs = write_runs(root)
    out = root / "results" / EXPERIMENT / "report"
    result = aggregate(runs, out, cli=True)
    assert result.returncode == 0, result.stderr
    return out


def section(html: str, heading: str) -> str:
    return html.split(heading, 1)[1].split("<h2>", 1)[0]


@pytest.mark.slow  # runs the report's CLI in a process
def test_summary_has_one_row_per_record_with_speedups(built):
    with open(built / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(CELLS)
    by_cell = {(r["device"], r["policy"], int(r["batch_size"])): r for r in rows}
    speedup = {cell: r["speedup_vs_baseline"] for cell, r in by_cell.items()}
    assert float(speedup["cpu", "mixed_float16", 32]) == pytest.approx(400 / 500)
    assert float(speedup["cpu", "mixed_float16", 64]) == pytest.approx(800 / 1100)
    assert float(speedup["gpu0", "mixed_float16", 32]) == pytest.approx(30 / 25)
    assert float(speedup["cpu", "float32", 32]) == 1.0
    low, high = (
        float(by_cell["cpu", "mixed_float16", 32][k]) for k in ("speedup_ci_low", "speedup_ci_high")
    )
    assert low < 400 / 500 < high < 1
    assert by_cell["cpu", "mixed_float16", 32]["speedup_verdict"] == "slower"
    assert by_cell["gpu0", "mixed_float16", 32]["speedup_verdict"] == "faster"
    # 60 against 59 ms, the processes a few percent apart: an interval holding 1, not a 2% gain.
    assert by_cell["gpu0", "mixed_float16", 128]["speedup_verdict"] == "no measurable difference"
    assert by_cell["cpu", "float32", 32]["repeats"] == "3"
    assert by_cell["gpu0", "mixed_float16", 128]["speedup_processes"] == "3"
    assert by_cell["gpu0", "mixed_float16", 128]["speedup_df"] == "2"
    # No float32 timing at gpu0 batch 64 (it ran out of memory), so no speedup there.
    assert speedup["gpu0", "mixed_float16", 64] == ""
    assert by_cell["gpu0", "float32", 64]["outcome"] == "oom"
    assert by_cell["gpu0", "float32", 32]["device_name"] == "Tesla T4"
    assert by_cell["cpu", "float32", 32]["device_name"] == "Test CPU 9000"
    assert by_cell["cpu", "float32", 128]["predicted_step_s"] == "12.0"
    keys = [(r["variant"], r["device"], r["policy"], int(r["batch_size"])) for r in rows]
    assert keys == sorted(keys)


@pytest.mark.slow  # runs the report's CLI in a process
def test_html_has_a_table_per_device_with_outcomes(built):
    html = (built / "index.html").read_text()
    assert EXPERIMENT in html and "seed_convnet" in html and "2.21.0" in html and "node07" in html
    cpu = section(html, "<h2>seed_convnet · tensorflow · pypi · cpu")
    assert "Test CPU 9000" in cpu and "<table" in cpu
    for batch_size in (32, 64, 128):
        assert f"<td>{batch_size}</td>" in cpu
    assert 'title="predicted 12.0 s/step &gt; train.max_step_seconds">over budget<' in cpu
    gpu = section(html, "<h2>seed_convnet · tensorflow · pypi · gpu0")
    assert "Tesla T4 (compute capability 7.5)" in gpu
    assert 'title="OOM when allocating tensor &lt;shape&gt;">OOM<' in gpu
    assert '<td class="same">no measurable difference<small>1.02×, 95% CI ' in gpu
    assert "<small>95% CI 29.1–30.9</small>" in gpu  # the cell's own interval
    assert "<shape>" not in html


@pytest.mark.slow  # runs the report's CLI in a process
def test_diagnosis_cites_measured_speedups(built):
    html = (built / "index.html").read_text()
    cpu = section(html, "<h2>seed_convnet · tensorflow · pypi · cpu").split("<h3>Diagnosis</h3>")[1]
    assert f"batch 32: slower, {400 / 500:.2f}× (95% interval " in cpu
    assert f"batch 64: slower, {800 / 1100:.2f}× (95% interval " in cpu
    assert "(speedup_vs_baseline)" in cpu
    assert "no fast float16 math (fast_float16 false)" in cpu and "measurably slower" in cpu
    gpu = section(html, "<h2>seed_convnet · tensorflow · pypi · gpu0").split("<h3>Diagnosis</h3>")[
        1
    ]
    assert gpu.lstrip().startswith('<ul class="diagnosis"><li>')
    assert f"batch 32: faster, {30 / 25:.2f}×" in gpu
    assert "batch 128: no measurable difference, 1.02×" in gpu
    assert "mixed_float16 fit batch 64, where float32 ran out of memory" in gpu


@pytest.mark.slow  # runs the report's CLI in a process
def test_html_shows_published_numbers_and_plots(built):
    html = (built / "index.html").read_text()
    published = html.split('<h2 id="published">Published (2020)</h2>', 1)[1]
    v100 = published.split("<h3>Tesla V100", 1)[1].split("<h3>", 1)[0]
    row_512 = v100.split("<td>512</td>", 1)[1].split("</tr>", 1)[0]
    assert "415" in row_512 and "377" in row_512 and f"{415 / 377:.2f}×" in row_512
    assert "321" in published and "304" in published
    assert "+7% to +10% (1.07×–1.10×) on the Tesla V100" in published
    group = "local/seed_convnet/tensorflow/pypi"
    for name in (
        f"{group}/cpu/ms_per_step.png",
        f"{group}/gpu0/speedup.png",
        "published_ms_per_step.png",
    ):
        assert f'<img src="{name}"' in html
        assert (built / name).read_bytes().startswith(PNG_MAGIC)
    assert "<script" not in html and "http" not in html
    assert not list(built.glob(".*.tmp"))


@pytest.mark.slow  # runs the report's CLI in a process
def test_runs_table_lists_every_record(built):
    runs = (built / "index.html").read_text().split('<h2 id="runs">Runs</h2>', 1)[1]
    for device, policy, batch_size, *_ in CELLS:
        assert f"run-{device}-{policy}-{batch_size}" in runs


def test_library_functions(tmp_path):
    records = load_records(write_runs(tmp_path))
    summary = summarise(records)
    assert list(summary.columns[:6]) == [
        "experiment",
        "machine",
        "model",
        "backend",
        "dataset",
        "image_size",
    ]
    assert set(summary["machine"]) == {"local"}  # records from before machines were an axis
    cpu = summary[summary["device"] == "cpu"]
    sentences = diagnose(cpu)
    assert any("batch 64: slower, 0.73×" in s for s in sentences)
    assert any(s.startswith("Over budget: float32 at batch 128") for s in sentences)
    published = load_published()
    v100 = policy_table(published[published["device"] == "Tesla V100"])
    assert "415" in [c["text"] for row in v100["rows"] for c in row]
    quadro = policy_table(published[published["device"] == "Quadro M2200"])
    assert {"text": "OOM", "css": "fail", "title": "OOM", "small": None, "href": None} in [
        c for row in quadro["rows"] for c in row
    ]
    assert PUBLISHED_CPU_S_PER_STEP == {"PyPI wheel": 321, "source build with AVX2/FMA": 304}
    page = render_html(summary, published, breakdown_table(records), "http://127.0.0.1:5000")
    assert page.count("<h2>seed_convnet · tensorflow · pypi · ") == 2
    # Each run's id, shortened, links to its page in the MLflow UI.
    link = "http://127.0.0.1:5000/#/experiments/1/runs/run-cpu-float32-32"
    assert f'<a href="{link}?workflowType=machine_learning">run-cpu-' in page


def test_each_cells_mlflow_run_gets_back_what_the_report_derived_of_it(tmp_path):
    summary = summarise(load_records(write_runs(tmp_path)))
    results = cell_results(summary)
    assert len(results) == len(CELLS)  # every record names its MLflow run
    metrics, tags = results["run-gpu0-mixed_float16-32"]
    assert metrics["speedup_vs_baseline"] == pytest.approx(30 / 25)
    assert metrics["speedup_ci_low"] < 30 / 25 < metrics["speedup_ci_high"]
    assert tags == {"speedup_verdict": "faster"}
    # The train job logged what the record holds; only what the report derived goes back.
    assert set(metrics) <= set(REPORT_METRICS) and "ms_per_step" not in metrics
    assert results["run-gpu0-float32-64"] == ({}, {})  # out of memory: nothing derived


@pytest.mark.slow  # builds a report
def test_no_records_is_a_one_line_error(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    out = tmp_path / "report"
    result = aggregate(runs, out)
    assert result.returncode == 1
    assert result.stderr.startswith("error: no run records")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow  # builds a report
def test_corrupt_record_is_named_and_leaves_the_old_report(tmp_path):
    runs = write_runs(tmp_path)
    out = tmp_path / "report"
    assert aggregate(runs, out).returncode == 0
    before = (out / "summary.csv").read_bytes()
    bad = runs / "pypi" / "cpu" / "float32" / "bs256.json"
    bad.write_text('{"outcome": "ok", ')
    result = aggregate(runs, out)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and str(bad) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (out / "summary.csv").read_bytes() == before


@pytest.mark.slow  # builds a report
def test_record_values_are_escaped_in_the_html(tmp_path):
    """A host name or a reason is data, never markup: nothing from a record runs in the page."""
    runs = write_runs(tmp_path, CELLS[:5])
    hostile = "<script>alert('host')</script>"
    for path in runs.rglob("*.json"):
        record = json.loads(path.read_text())
        record["fingerprint"]["host"] = hostile
        if record["outcome"] != "ok":
            record["reason"] = '<script>alert("reason")</script> & <img src=x onerror=alert(1)>'
        path.write_text(json.dumps(record))
    out = tmp_path / "report"
    assert aggregate(runs, out).returncode == 0
    html = (out / "index.html").read_text()
    assert "<script" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#39;host&#39;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
