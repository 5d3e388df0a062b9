# Report: every run record -> summary.csv and index.html (tables, plot, published numbers).


rule aggregate:
    input:
        records=RECORDS,
        calibrations=CALIBRATIONS,
    output:
        summary=REPORT["summary"],
        html=REPORT["html"],
        plots=REPORT["plots"],
    log:
        f"results/{EXPERIMENT}/logs/aggregate.log",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    shell:
        "python workflow/scripts/aggregate.py --records {input.records} --summary {output.summary}"
        " --calibration {input.calibrations} --html {output.html} > {log} 2>&1"
