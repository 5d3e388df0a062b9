# mptbench: does mixed-precision training speed up this model on this hardware and build, and why?
# The configuration is Hydra's (conf/); pick it with --config experiment=NAME overrides=[...].
from snakemake.utils import min_version

min_version("9.0")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/variants.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


report: "workflow/report/workflow.rst"


rule all:
    default_target: True
    input:
        rules.aggregate.output,


onstart:
    check_gpus()


onsuccess:
    print_headline()


onerror:
    mark_sweep_failed()
