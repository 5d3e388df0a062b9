# Training: one job per series (a model, backend, variant and device: its comparison groups, one
# per batch size, each group's cells, one per policy, timed together, the groups' processes
# interleaved), each cell logged to MLflow and recorded as JSON; and the probes, fits
# searches, parity runs and calibrations the groups draw on.


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
        # What the script reads, no more: another tracking setting changed (env_if_set, ui)
        # would otherwise rerun this rule and, through its output's time, every train job.
        tracking={
            k: CFG["tracking"][k] for k in ("uri", "artifact_root", "system_metrics")
        },
        name=EXPERIMENT,
    script:
        "../scripts/init_tracking.py"


rule model_info:
    # That the model builds (a user's builder too), its size and its FLOPs per example,
    # counted by the framework: once per model, before any of its cells.
    # It reads the data's shape from the config, or from the cache where only that knows it.
    input:
        prepared=inputs.model_info_data(CFG),
    output:
        layout.MODEL_INFO,
    log:
        layout.MODEL_INFO_LOG,
    conda:
        "../../envs/mptbench.yaml"
    params:
        model=model_of,
        shape=layout.model_data(DATASET),
    script:
        "../scripts/model_info.py"


rule probe:
    # One training step on a few images per variant, device and policy: each cell predicts
    # its step time from it and skips (over_budget) what would exceed train.max_step_seconds.
    input:
        prepared=PREPARED,
        env=layout.VARIANT_ENV,
        model=model_info_of,
    output:
        layout.OUTPUTS["probe"],
    log:
        layout.OUTPUT_LOGS["probe"],
    conda:
        "../../envs/mptbench.yaml"
    threads: TIMING.threads
    resources:
        **TIMING.resources(),
    params:
        run=probe_run,
    script:
        "../scripts/probe.py"


rule train:
    # A series of comparison groups: each group's cells (one per policy) timed together, taking
    # turns in the same processes, so each speedup is measured paired; the groups' processes
    # spread in time, interleaved; one record and one MLflow run per cell.
    input:
        prepared=PREPARED,
        # The store must exist, not be newer: a recreated store retimes no finished group.
        tracking=ancient(TRACKING),
        env=layout.VARIANT_ENV,
        model=model_info_of,
        probes=probes_of_group,
        fits=fits_of_group,
    output:
        records=SERIES_RECORDS,
        profiles=directory(SERIES_PROFILES),
    log:
        layout.RUN_LOG,
    conda:
        "../../envs/mptbench.yaml"
    threads: TIMING.threads
    resources:
        **TIMING.resources(groups=len(BATCH_SIZES)),
    params:
        runs=train_runs,
        host=host_reference,
    script:
        "../scripts/train.py"


rule fits:
    # What fits: the largest batch of one policy's cells on their device (within
    # device.<kind>.fits_search_mb), each try a short real training run in a fresh process,
    # its peak memory measured; the grid's own batch sizes first (the cells' peak memory).
    input:
        prepared=PREPARED,
        env=layout.VARIANT_ENV,
        probe=probe_of_cell,
    output:
        layout.OUTPUTS["fits"],
    log:
        layout.OUTPUT_LOGS["fits"],
    conda:
        "../../envs/mptbench.yaml"
    threads: TIMING.threads
    resources:
        **TIMING.resources(),
    params:
        run=fit_run,
        settings=fit_settings,
    script:
        "../scripts/fits.py"


rule parity:
    # Does it still learn: each policy of a comparison group from the baseline's seed and data
    # order, train.parity_steps steps, and the baseline from a second seed for its own spread.
    # After the series' timing: under train.plan fast, for the answer's candidates alone.
    input:
        prepared=PREPARED,
        env=layout.VARIANT_ENV,
        probes=probes_of_group,
        records=SERIES_RECORDS,
    output:
        layout.OUTPUTS["parity"],
    log:
        layout.OUTPUT_LOGS["parity"],
    conda:
        "../../envs/mptbench.yaml"
    threads: TIMING.threads
    resources:
        **TIMING.resources(),
    params:
        runs=group_runs,
        settings=params.parity_settings(CFG),
    script:
        "../scripts/parity.py"


rule calibrate:
    # The device's measured peak per dtype, with the backend, the variant's build and settings;
    # the conv peak also over the grid's models' own convolutions (their descriptions').
    input:
        env=layout.VARIANT_ENV,
        models=calibration_models,
    output:
        layout.CALIBRATION,
    log:
        layout.CALIBRATION_LOG,
    conda:
        "../../envs/mptbench.yaml"
    threads: TIMING.threads
    resources:
        **TIMING.resources(runtime=30),
    params:
        backend=backend_of,
        variant=variant_of,
        settings=calibrate_settings,
        tf32=device_tf32,
        model_batch=calibration_batch,
    script:
        "../scripts/calibrate.py"
