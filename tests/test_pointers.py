"""Every pointer to a section resolves: a message, comment, config or page that sends the reader
to a section of README, the docs or the benchmarks names a heading that exists."""

from __future__ import annotations

import re
import subprocess

from test_docs import FENCE, README, ROOT, _anchors

# A pointer to a section from code, configs, messages and docs: `README: "Quick start"` (or
# unquoted, to the end of its clause), `docs/guide/clusters.md#running-on-a-cluster-slurm`,
# `README.md#tests`, and `bench/README.md, bench_grid` (a benchmarks section by its name).
SECTION_NAMED = re.compile(r"\bREADME:? +(?:\"([^\"]{1,120})\"|([A-Z][\w ,'-]*\w))")
SECTION_ANCHOR = re.compile(r"(?<![\w/.-])((?:docs/[\w/-]+|bench/README|README)\.md)#([\w-]+)")
BENCH_SECTION = re.compile(r"\bbench/README\.md, ([\w.' -]*\w)")
PLANTED = {"tests/test_pointers.py", "tests/test_docs.py"}
# A quoted title may run on over a line break, the next line's comment marker between.
BREAK = re.compile(r"\s*\n\s*(?:#+|//|\*)?\s*")


def _headings(text: str) -> list[str]:
    return [line.lstrip("#").strip().lower() for line in FENCE.sub("", text).splitlines()
            if re.match(r"#{1,6} ", line)]


def _dead_pointers(name: str, text: str) -> list[str]:
    """'name:line: pointer' for each pointer in `text` to a section that does not exist."""
    readme = _headings(README.read_text())
    bench = _headings((ROOT / "bench" / "README.md").read_text())
    dead = []

    def line(match) -> int:
        return text.count("\n", 0, match.start()) + 1

    for match in SECTION_NAMED.finditer(text):
        title = BREAK.sub(" ", match.group(1) or match.group(2))
        if title.lower() not in readme:
            dead.append((line(match), f"README has no section {title!r}"))
    for match in SECTION_ANCHOR.finditer(text):
        page, anchor = match.groups()
        if not (ROOT / page).is_file() or anchor not in _anchors((ROOT / page).read_text()):
            dead.append((line(match), f"{page}#{anchor}"))
    for match in BENCH_SECTION.finditer(text):
        if not any(match.group(1).lower() in heading for heading in bench):
            dead.append((line(match), f"bench/README.md has no section {match.group(1)!r}"))
    return [f"{name}:{number}: {what}" for number, what in sorted(dead)]


def _tracked_texts() -> dict[str, str]:
    """Every tracked text file but the tests that plant pointers and links to nowhere."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    texts = {}
    for name in listed:
        path = ROOT / name
        if path.is_symlink() or not path.is_file() or name in PLANTED:
            continue
        try:
            texts[name] = path.read_text()
        except UnicodeDecodeError:
            continue
    return texts


def test_every_pointer_to_a_section_finds_it():
    """A message or comment that sends the reader to a section of README, the docs or the
    benchmarks names one that exists (a heading moved to the docs site leaves none behind)."""
    texts = _tracked_texts()
    pointers = sum(len(pattern.findall(text)) for text in texts.values()
                   for pattern in (SECTION_NAMED, SECTION_ANCHOR, BENCH_SECTION))
    assert pointers > 10  # the scan reads what it should
    dead = [line for name, text in texts.items() for line in _dead_pointers(name, text)]
    assert not dead, "\n".join(dead)


def test_a_pointer_to_no_section_is_caught():
    planted = (
        '(still CHANGE_ME; README: Running on a cluster)\n'
        '# README: "Several\n# machines, one report"\n'
        "see docs/guide/clusters.md#running-on-a-cluster and README.md#no-such-heading\n"
        "(bench/README.md, bench_nothing.py)\n"
        '# README: "Quick start"; docs/guide/clusters.md#running-on-a-cluster-slurm\n'
    )
    dead = _dead_pointers("planted", planted)
    assert [line.split(":")[1] for line in dead] == ["1", "2", "4", "4", "5"], dead
