"""The report's page: index.html from templates/index.html.j2 (Jinja2, autoescaped)."""

from __future__ import annotations

import pandas as pd

from mptbench.core.frameworks import VERSION_TITLES
from mptbench.plan.layout import GROUP_DIAGNOSIS, GROUP_TABLE, PUBLISHED_PLOT, group_file
from mptbench.report import sections
from mptbench.report.answer import answers
from mptbench.report.machines import machine_facts, machines
from mptbench.report.summary import GROUP_KEYS
from mptbench.report.variants import variants_section

CSS = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #ccc; }
h3 { margin-bottom: .3rem; } .meta, .note { color: #555; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
small { display: block; color: #777; font-size: .75rem; }
.fail { color: #a40000; font-weight: 600; cursor: help; } .missing { color: #aaa; }
.faster { color: #116611; font-weight: 600; } .slower { color: #a40000; } .same { color: #555; }
img { max-width: 100%; border: 1px solid #eee; }
.scroll { max-width: 100%; overflow-x: auto; }
table.runs td.text { max-width: 22rem; overflow-wrap: anywhere; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(28rem, 1fr)); gap: .5rem; }
.plots img { width: 100%; }
ul.diagnosis li { margin-bottom: .3rem; }
nav ul { display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; padding-left: 1rem; }
.answer .lead { font-size: 1.3rem; line-height: 1.4; margin: .6rem 0 .3rem; }
.answer .details { margin-top: 0; }
"""

HOW_TO_READ = (
    "Each table is one model on one Keras backend with one variant on one device. Rows are "
    "batch sizes; for each dtype policy a cell gives the milliseconds per training step "
    "(smaller is faster: the geometric mean over its processes of each process's mean step, "
    "what a training run's wall time follows) with its 95% confidence interval beneath it: "
    "each cell is timed in train.repeats separate processes (more where a speedup's verdict "
    "is still open and its interval wider than train.precision), and the interval, a t "
    "interval over those processes, covers the variation between processes as well as within "
    'one. "Speedup vs" the baseline policy (float32 unless a policy\'s yaml says otherwise) '
    "is paired: the policies of a batch size take turns in the same processes, and the "
    "speedup is the geometric mean over processes of the baseline's round over the policy's "
    "round, with its own interval (so the two ms/step columns need not divide to it exactly): "
    "faster or slower only where the whole interval is above or below 1, otherwise "
    '"no measurable difference". A cell without a timing says why: '
    "OOM (out of memory, on evidence), killed (killed from outside), over budget (a step is, or"
    " is clearly predicted to be, slower than train.max_step_seconds), NaN/Inf (the loss became"
    " non-finite) or unsupported (no kernel for the policy on this device); hover over it for "
    "the recorded reason. A whole run (the answer's times) is what fit spends on the prepared "
    "cache: its steps, a validation pass after each epoch, the first epoch's compiling and "
    "what each later epoch's start waits for the last epoch's tf.data tuning thread; a fit "
    "that reads image files also decodes them in its first epoch, which is not in it. "
    "The published (2020) numbers follow for comparison. With cells from "
    "several machines (a cluster's targets, or results merged from several machines), each "
    "machine has its own sections, and Machines compared sets them side by side."
)


def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("mptbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )


def render_html(
    summary: pd.DataFrame,
    published: pd.DataFrame,
    breakdown: pd.DataFrame,
    ui_url: str | None = None,
    extra: sections.Extra | None = None,
    groups: list[dict] | None = None,
) -> str:
    """The whole index.html: the answers first, then a section per device (its table, plots,
    where its time went and its diagnosis), the variants, accuracy, the published numbers,
    every run. `groups`: sections.all_groups' answer, where the caller has it already."""
    import markupsafe

    unique = sections.unique
    meta = (
        f"Model {unique(summary['model'])} on {unique(summary['dataset'])} at "
        f"{unique(summary['image_size'])} px; backend {unique(summary['backend'])}; "
        + "".join(f"{title} {unique(summary[field])}, " for field, title in VERSION_TITLES.items()
                  if field in summary and summary[field].notna().any())
        + f"Keras {unique(summary['keras'])}; "
        f"host {unique(summary['host'])}; machine {unique(summary['machine'])}."
    )
    return (
        _env()
        .get_template("index.html.j2")
        .render(
            title=f"Mixed-precision training benchmark: {unique(summary['experiment'])}",
            css=markupsafe.Markup(CSS),  # our own constant, not data
            meta=meta,
            answers=answers(summary),
            how_to_read=HOW_TO_READ,
            groups=sections.all_groups(summary, breakdown, extra) if groups is None else groups,
            fits_published=(extra.fits or {}).get("published") if extra else None,
            machines=machines(summary, published),
            several_machines=machine_facts(summary),
            backends=sections.backends(summary),
            variants=variants_section(summary),
            accuracy=sections.accuracy(summary),
            published=sections.published_section(summary, published) | {"plot": PUBLISHED_PLOT},
            runs=sections.runs(summary, ui_url),
        )
    )


def _csv_table(table: dict) -> str:
    """A table's cells as CSV, each with its second line (an interval) in brackets."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [f"{c['text']} ({c['small']})" if c["small"] else c["text"] for c in table["head"]]
    )
    for row in table["rows"]:
        writer.writerow([f"{c['text']} [{c['small']}]" if c["small"] else c["text"] for c in row])
    return out.getvalue()


def render_group_files(groups: list[dict]) -> dict[str, bytes]:
    """Per (model, backend, variant, device) of `groups` (sections.all_groups): its policy
    table as CSV and its diagnosis as a page."""
    files = {}
    for g in groups:
        key = tuple(g[k] for k in GROUP_KEYS)
        files[group_file(key, GROUP_TABLE)] = _csv_table(g["table"]).encode()
        page = _env().get_template("diagnosis.html.j2").render(group=g)
        files[group_file(key, GROUP_DIAGNOSIS)] = page.encode()
    return files
