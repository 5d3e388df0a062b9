# Report: every run record -> summary.csv, breakdown.csv, layers.csv, index.html and, per
# variant and device, its table, plots and diagnosis; all of it in Snakemake's own report too.


rule aggregate:
    input:
        **REPORTED,
        records=RECORDS,
        calibrations=CALIBRATIONS,
        tracking=TRACKING,
        included=INCLUDED,
    output:
        summary=report(
            f"{REPORT_DIR}/{layout.SUMMARY_CSV}",
            caption="../report/summary.rst",
            category="Summary",
            labels={"file": "summary.csv"},
        ),
        breakdown=report(
            f"{REPORT_DIR}/{layout.BREAKDOWN_CSV}",
            caption="../report/breakdown.rst",
            category="Summary",
            labels={"file": "breakdown.csv"},
        ),
        layers=report(
            f"{REPORT_DIR}/{layout.LAYERS_CSV}",
            caption="../report/layers.rst",
            category="Summary",
            labels={"file": "layers.csv"},
        ),
        html=report(
            f"{REPORT_DIR}/{layout.INDEX_HTML}",
            caption="../report/index.rst",
            category="Summary",
            labels={"file": "index.html"},
        ),
        published=report(
            f"{REPORT_DIR}/{layout.PUBLISHED_PLOT}",
            caption="../report/published.rst",
            category="Published (2020)",
            labels={"figure": "ms/step"},
        ),
        groups=group_reports(REPORT_DIR),
        headline=f"{REPORT_DIR}/{layout.HEADLINE}",
    log:
        f"results/{EXPERIMENT}/logs/aggregate.log",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    params:
        report_dir=output_dir,
        ui_url=CFG["tracking"]["ui"] or "",
        include=CFG["report"]["include"],
    script:
        "../scripts/aggregate.py"
