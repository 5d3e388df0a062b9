"""The first page and the docs site: README.md stays one short page whose commands and tables
are the docs' own, the site builds strictly, and every link into a page finds its heading."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MOST_README_LINES = 200
# A link in markdown to a page of ours (a relative .md path, or none: this page), and its anchor.
LINK = re.compile(r"\]\((?!\w+:)([^)\s#]*\.md|)(?:#([^)\s]+))?\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


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


def _anchors(text: str) -> set[str]:
    """The ids of a page's headings, as the toc extension makes them (its slugify: ASCII, no
    punctuation, lower case, hyphens for spaces); a fenced block holds no heading."""
    found = set()
    for line in FENCE.sub("", text).splitlines():
        heading = re.match(r"#{1,6} (.+)", line)
        if heading:
            words = unicodedata.normalize("NFKD", heading.group(1)).encode("ascii", "ignore")
            words = re.sub(r"[^\w\s-]", "", words.decode()).strip().lower()
            found.add(re.sub(r"[-\s]+", "-", words))
    return found


def test_every_link_into_a_page_names_a_page_and_a_heading_it_has():
    """README's links and the pages' (the benchmarks page is bench/README.md): a renamed
    heading or a moved page leaves no link pointing at nothing."""
    linking = {README: README.read_text()} | _pages()
    checked = 0
    for page, text in linking.items():
        for target, anchor in LINK.findall(FENCE.sub("", text)):
            where = (page.parent / target) if target else page
            name = f"{page.relative_to(ROOT)}: {target}#{anchor}"
            assert where.is_file(), f"{name}: no such page"
            if anchor:
                assert anchor in _anchors(where.read_text()), f"{name}: no such heading"
                checked += 1
    assert checked > 20  # the scan finds the anchors the pages link


# A measured figure: a duration, a size or a speedup (a number, or a range, and its unit).
NUMBER = r"\d+(?:[.,]\d+)?(?: ?[-–] ?\d+(?:[.,]\d+)?)?"
UNIT = r"ms|s|seconds?|min|minutes?|h|hours?|[KMGT]i?B"
FIGURE = re.compile(rf"(?<![\w.–-])({NUMBER})(?:\s?({UNIT})|[x×])(?!\w)")
# A unit as the benchmarks page may write it ("15 minutes" is held by "15 min").
SAME_UNIT = {"seconds": "s", "second": "s", "minutes": "min", "minute": "min", "hours": "h",
             "hour": "h"}
LINKS_BENCHMARKS = re.compile(r"\]\([^)]*(?:bench/README|benchmarks)\.md[^)]*\)")
# A setting's value, as the pages give it: "`train.max_step_seconds` (20 s)", "`x`, 4 s".
AFTER_A_SETTING = re.compile(r"`[\w.<>\[\]]+`[,:]? \(?$")
# Figures that are no measurement of ours: settings said in words, and the published ones.
NOT_MEASURED = {
    "to be at least 60 s": "SLURM's MinJobAge, a site's setting",
    "sampled\nevery 10 s": "MLflow's system-metrics interval",
    "over 2x\n  train.precision": "the rule that stops adding processes, in its message",
    "the published 321 vs 304 s/step": "the 2020 experiment's",
    "on the 4 GB Quadro M2200": "the 2020 experiment's card",
    'To ask "what fits in 4 GB"': "an example of device.<kind>.fits_search_mb",
}


def _paragraphs(text: str) -> list[str]:
    """A page's paragraphs, list items and table rows; a quote or a fenced block goes with
    the paragraph that leads into it."""
    parts = re.split(r"\n\s*\n|\n(?=\s*- |\| )", text)
    joined: list[str] = []
    for part in parts:
        if joined and part.lstrip().startswith((">", "```")):
            joined[-1] += "\n" + part
        else:
            joined.append(part)
    return joined


def _holds(benchmarks: str, number: str, unit: str | None) -> bool:
    """Whether the benchmarks page states this figure: the number in the same unit (a speedup
    there may stand bare, in a table's column of them)."""
    if unit is None:
        after = r"(?:\s?[x×])?"
    else:
        unit = SAME_UNIT.get(unit, unit)
        words = [u for u, short in SAME_UNIT.items() if short == unit]
        after = r"\s?(?:" + "|".join(map(re.escape, [unit, *words])) + r")(?!\w)"
    return re.search(rf"(?<![\d.]){re.escape(number)}(?!\.?\d){after}", benchmarks) is not None


def _unsourced_figures(text: str, benchmarks: str) -> list[str]:
    """Figures in `text` that are neither in a paragraph linking the benchmarks page, with
    that page holding their number, nor a setting's value or a figure NOT_MEASURED."""
    held = benchmarks.replace("–", "-")
    found = []
    for paragraph in _paragraphs(text):
        linked = LINKS_BENCHMARKS.search(paragraph)
        for match in FIGURE.finditer(paragraph):
            number = match.group(1).replace("–", "-")
            if AFTER_A_SETTING.search(paragraph[: match.start()]):
                continue
            if any(snippet in paragraph and match.group(0) in snippet
                   for snippet in NOT_MEASURED):
                continue
            if linked and _holds(held, number, match.group(2)):
                continue
            found.append(" ".join(paragraph[max(0, match.start() - 60): match.end()].split()))
    return found


def test_measured_figures_live_in_the_benchmarks_page_alone():
    """A figure stated on a page goes stale: README and the docs state a duration, size or
    speedup only where they link bench/README.md and it holds the figure (the benchmarks
    page is that file, a link, so a new measurement edits one file)."""
    assert (DOCS / "benchmarks.md").resolve() == (ROOT / "bench" / "README.md").resolve()
    benchmarks = (ROOT / "bench" / "README.md").read_text()
    pages = {README: README.read_text()} | {
        p: t for p, t in _pages().items() if p.name != "benchmarks.md"}
    assert sum(len(FIGURE.findall(t)) for t in pages.values()) > 30  # the scan reads them
    stated = [f"{page.relative_to(ROOT)}: ...{figure}" for page, text in pages.items()
              for figure in _unsourced_figures(text, benchmarks)]
    assert not stated, "\n".join(stated)


def test_a_figure_without_its_source_is_caught():
    benchmarks = "| wall time | **27.7 min** |\n| speedup | 2.81 (2.67-2.95) | 15.1 s | (15) |"
    planted = (
        "On 2 cores the grid took 31 min.\n\n"
        "It took 27.7 min ([measured](bench/README.md#grid)).\n\n"
        "It took 99.9 min ([measured](bench/README.md#grid)).\n\n"
        "- mixed_bfloat16 ran 2.81× float32 ([measured](../benchmarks.md#backends))\n"
        "- and 3.5x with AMX\n\n"
        "A cell over `train.max_step_seconds` (20 s) is skipped; one step took 15\nminutes.\n\n"
        "A step takes 15 minutes ([measured](bench/README.md#grid))."
    )
    found = _unsourced_figures(planted, benchmarks)
    ends = ["the grid took 31 min", "It took 99.9 min", "and 3.5x", "one step took 15 minutes",
            "A step takes 15 minutes"]  # held neither as 15.1 s nor as a bare (15)
    assert len(found) == len(ends), found
    assert all(f.endswith(e) for f, e in zip(found, ends, strict=True)), found


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



def test_the_python_range_the_pages_give_is_pyproject_s():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    low, high = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", declared).groups()
    said = f"Python 3.{low} to 3.{int(high) - 1}"
    for page in (README, DOCS / "getting-started.md"):
        assert said in page.read_text(), f"{page.name} does not say {said} ({declared})"
