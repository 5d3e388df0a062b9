"""The first page and the docs site: README.md stays one short page whose commands and tables
are the docs' own, the site builds strictly, and nothing the long README said went missing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MOST_README_LINES = 200
# Every section of the README before the docs site (1,005 lines): each is a section of a page.
OLD_SECTIONS = [
    "Quick start", "Offline try-out", "Experiments", "Models: ours, the standard ones, and yours",
    "Data", "Configuration and overrides", "Timing: what a number means", "Why: the diagnosis",
    "Where the time went: op-level profiles",
    "Memory and numerics: what fits, and does it still learn", "TensorFlow variants",
    "Keras backends: TensorFlow, JAX, PyTorch", "GPUs",
    "Where to look: the report, Snakemake's report, MLflow", "Running on a cluster (SLURM)",
    "Several machines, one report", "When things go wrong", "Benchmarks", "Layout", "Tests",
]


def _pages() -> dict[Path, str]:
    return {p: p.read_text() for p in sorted(DOCS.rglob("*.md"))}


def _fenced_after(text: str, marker: str) -> str:
    """The first fenced command after an HTML comment marker (what .ci/run reads)."""
    found = re.search(re.escape(marker) + r"\s*```sh\n(.+?)\n```", text, re.S)
    assert found, f"no command after {marker}"
    return found.group(1)


def _table(text: str, head: str) -> list[str]:
    """The rows of the markdown table whose head row starts with `head`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_the_readme_is_one_short_page_that_links_into_the_docs():
    text = README.read_text()
    assert len(text.splitlines()) <= MOST_README_LINES
    linked = set(re.findall(r"\]\((docs/[^)#]+)", text))
    assert linked, "README links no docs page"
    for target in linked:
        assert (ROOT / target).exists(), f"README links {target}, which does not exist"
    picture = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert picture and (ROOT / picture.group(1)).stat().st_size > 10_000, "no report picture"


def test_the_readme_commands_and_experiments_are_the_docs_own():
    readme, start = README.read_text(), (DOCS / "getting-started.md").read_text()
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        assert _fenced_after(readme, marker) in start, f"getting-started lacks {marker}'s command"
    head = "| `--config experiment=` |"
    assert _table(readme, head) == _table(start, head)
    experiments = {p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")}
    named = set(re.findall(r"^\| `(\w+)`", "\n".join(_table(readme, head)), re.M))
    assert named == experiments, "the experiments table and conf/experiment/ disagree"


def test_every_section_of_the_old_readme_is_a_section_of_a_page():
    headings = {
        line[3:].strip()
        for text in _pages().values()
        for line in text.splitlines()
        if line.startswith("## ")
    }
    missing = [s for s in OLD_SECTIONS if s not in headings]
    assert not missing, f"no docs page has these sections: {missing}"


def test_measured_figures_live_in_the_benchmarks_page_alone():
    # A timing stated on a page goes stale; the page links bench/README.md instead. The
    # benchmarks page is that file (a link), so a new measurement edits one file.
    assert (DOCS / "benchmarks.md").resolve() == (ROOT / "bench" / "README.md").resolve()
    stated = re.compile(r"\b(took|measured at|ran in) \d+(\.\d+)? ?(min|s|ms)\b")
    for page, text in _pages().items():
        if page.name == "benchmarks.md":
            continue
        assert not stated.search(text), f"{page.relative_to(ROOT)} states a measured time"


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]'")
    return subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1", "PATH": ""},
    )


@pytest.mark.slow
def test_the_site_builds_strictly_and_a_broken_link_fails_it(tmp_path):
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "method" / "timing" / "index.html").exists()
    # The same build as CI's (no --quiet: it hides the warnings, and --strict counts none)
    # fails on a link to no page, in a copy of the site.
    ci = (ROOT / ".ci" / "run").read_text()
    (line,) = [x for x in ci.splitlines() if "mkdocs build" in x]
    assert "--strict" in line and "--quiet" not in line and " -q" not in line
    copy = tmp_path / "copy"
    shutil.copytree(DOCS, copy / "docs", symlinks=True)
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "bench").mkdir()
    shutil.copy(ROOT / "bench" / "README.md", copy / "bench" / "README.md")
    with open(copy / "docs" / "guide" / "variants.md", "a") as page:
        page.write("\n\nSee [the missing page](missing.md).\n")
    broken = _build(copy, tmp_path / "broken")
    assert broken.returncode != 0 and "missing.md" in broken.stdout + broken.stderr


# A repository path as code, comments, docs and rules name one: folders, then a file with a
# suffix of ours. Results and caches a run makes, and other packages' sources, are no such path.
NAMED_PATH = re.compile(r"(?<![\w./<{$-])((?:[\w-]+/)+[\w-]+\.(?:py|yaml|smk|md|j2|toml|sh|rst))\b")
NOT_OURS = ("results/", "resources/", "keras/", "tensorflow/", "site-packages/", "bench/.work/")


def _named_paths() -> list[tuple[str, int, str]]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    found = []
    for name in listed:
        path = ROOT / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            found += [(name, number, m.group(1)) for m in NAMED_PATH.finditer(line)
                      if not m.group(1).startswith(NOT_OURS)]
    return found


def test_every_repository_path_named_in_code_docs_and_rules_exists():
    """'see engine/kernels.py' is how this codebase is navigated: a name that no longer
    resolves (from the root, src/, the package, tests/, conf/, docs/, or the naming file's
    folder or the one above it) sends the reader nowhere."""
    bases = [ROOT, ROOT / "src", ROOT / "src" / "mptbench", ROOT / "tests", ROOT / "conf",
             ROOT / "docs"]
    named = _named_paths()
    assert len(named) > 300  # the scan reads what it should
    dead = [
        f"{name}:{number}: {ref}" for name, number, ref in named
        if not any((base / ref).exists() for base in
                   [*bases, (ROOT / name).parent, (ROOT / name).parent.parent])
    ]
    assert not dead, "\n".join(dead)

