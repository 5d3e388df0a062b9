# Report: every run record -> summary.csv and index.html (tables, plots, published numbers).


rule aggregate:
    input:
        records=RECORDS,
        calibrations=CALIBRATIONS,
        tracking=TRACKING,
    output:
        summary=f"{REPORT_DIR}/summary.csv",
        breakdown=f"{REPORT_DIR}/{layout.BREAKDOWN_CSV}",
        html=f"{REPORT_DIR}/index.html",
        plots=expand("{folder}/{plot}", folder=REPORT_DIR, plot=layout.REPORT_PLOTS),
    log:
        f"results/{EXPERIMENT}/logs/aggregate.log",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    script:
        "../scripts/aggregate.py"
