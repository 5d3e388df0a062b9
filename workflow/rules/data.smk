# Data: (make the offline fixture,) download and verify the archive, build the tfds cache.


rule make_fixture:
    # Only the smoke datasets have a fixture (the others no such key): an archive in the real
    # layout, made here.
    output:
        archive=layout.FIXTURE,
        sha256=f"{layout.FIXTURE}.sha256",
    log:
        "resources/logs/make_fixture/{archive}.log",
    wildcard_constraints:
        archive=r"[^/]+\.(tgz|tar\.gz)",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    params:
        fixture=DATASET.get("fixture") or {},
        builder=DATASET["builder"],
    script:
        "../scripts/make_fixture.py"


# A folder of the user's own images is read where it is: nothing to download, and no rule may
# claim to make (and so on failure remove) the user's folder. Synthetic data has no source.
if DATASET["builder"] not in ("image_folder", "synthetic"):

    rule download:
        input:
            local_inputs(DATASET["url"], DATASET["sha256_url"]),
        output:
            archive=ARCHIVE,
        log:
            f"resources/logs/download/{Path(ARCHIVE).name}.log",
        retries: 1
        localrule: True
        conda:
            "../../envs/mptbench.yaml"
        params:
            url=DATASET["url"],
            sha256=DATASET["sha256"] or "",
            sha256_url=DATASET["sha256_url"] or "",
        script:
            "../scripts/download.py"


rule prepare:
    input:
        archive=ARCHIVE or [],
    output:
        info=PREPARED,
    log:
        f"resources/logs/prepare/{layout.dataset_key(DATASET)}.log",
    conda:
        "../../envs/mptbench.yaml"
    threads: 8
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        name=DATASET["name"],
        image_size=DATASET["image_size"],
        builder=DATASET["builder"],
        data_dir=output_dir,
        # A folder of images has no url but a path; only image_folder's config has the key.
        url=DATASET["url"] or DATASET.get("path"),
        dataset=DATASET,
    script:
        "../scripts/prepare.py"


rule data:
    input:
        PREPARED,
