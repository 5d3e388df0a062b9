# Training: one job per grid cell, each logged to MLflow and recorded as JSON.


rule tracking_init:
    # Creates the MLflow store and experiment once: concurrent first use races on the schema.
    output:
        TRACKING,
    log:
        f"results/{EXPERIMENT}/logs/tracking_init.log",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    params:
        uri=CFG["tracking"]["uri"],
        artifact_root=CFG["tracking"]["artifact_root"] or "",
        name=EXPERIMENT,
        system_metrics=str(CFG["tracking"]["system_metrics"]).lower(),
    shell:
        "python workflow/scripts/init_tracking.py --uri {params.uri:q} --name {params.name:q}"
        " --artifact-root={params.artifact_root:q} --system-metrics {params.system_metrics}"
        " --output {output} > {log} 2>&1"


rule probe:
    # One training step on a few images per variant, device and policy: each cell predicts
    # its step time from it and skips (over_budget) what would exceed train.max_step_seconds.
    input:
        prepared=PREPARED,
        env=VARIANT_ENV,
    output:
        PROBE,
    log:
        "results/{experiment}/logs/probe/{variant}/{device}/{policy}.log",
    conda:
        "../../envs/mptbench.yaml"
    threads: train_threads
    resources:
        **TIMING_SLOTS,
        mem_mb=train_mem_mb,
        runtime=train_runtime,
        gpu=train_gpus,
    params:
        run=probe_run_json,
    shell:
        "python workflow/scripts/train.py --probe-only --run {params.run:q}"
        " --prepared {input.prepared} --env {input.env} --record {output} > {log} 2>&1"


rule train:
    input:
        prepared=PREPARED,
        tracking=TRACKING,
        env=VARIANT_ENV,
        probe=probe_of_cell,
    output:
        record=RUN_RECORD,
    log:
        RUN_LOG,
    conda:
        "../../envs/mptbench.yaml"
    threads: train_threads
    resources:
        **TIMING_SLOTS,
        mem_mb=train_mem_mb,
        runtime=train_runtime,
        gpu=train_gpus,
    params:
        run=train_run_json,
    shell:
        "python workflow/scripts/train.py --run {params.run:q} --prepared {input.prepared}"
        " --tracking {input.tracking} --env {input.env} --probe={input.probe:q}"
        " --record {output.record} > {log} 2>&1"


rule calibrate:
    # The device's measured peak per dtype, with the variant's TensorFlow and settings.
    input:
        env=VARIANT_ENV,
    output:
        CALIBRATION,
    log:
        "results/calibration/{variant}/{device}.log",
    conda:
        "../../envs/mptbench.yaml"
    threads: train_threads
    resources:
        **TIMING_SLOTS,
        mem_mb=train_mem_mb,
        runtime=30,
        gpu=train_gpus,
    params:
        variant=variant_json,
        settings=calibrate_settings_json,
    shell:
        "python workflow/scripts/calibrate.py --device {wildcards.device} --env {input.env}"
        " --variant {params.variant:q} --settings {params.settings:q} --output {output}"
        " > {log} 2>&1"
