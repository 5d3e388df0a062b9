# Data: (make the offline fixture,) download and verify the archive, build the tfds cache.


rule make_fixture:
    # Only the smoke dataset has a fixture: an archive in Imagenette's layout, made here.
    output:
        archive="resources/fixtures/{archive}",
        sha256="resources/fixtures/{archive}.sha256",
    log:
        "resources/logs/make_fixture/{archive}.log",
    wildcard_constraints:
        archive=r"[^/]+\.(tgz|tar\.gz)",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    params:
        fixture=fixture_options,
        builder=DATASET["builder"],
    shell:
        "python workflow/scripts/make_fixture.py --archive {output.archive}"
        " --builder {params.builder} --options {params.fixture:q} > {log} 2>&1"


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
    shell:
        "python workflow/scripts/download.py --url {params.url:q} --dest {output.archive}"
        " --sha256={params.sha256:q} --sha256-url={params.sha256_url:q} > {log} 2>&1"


rule prepare:
    input:
        archive=ARCHIVE,
    output:
        info=PREPARED,
    log:
        f"resources/logs/prepare/{dataset_key(DATASET)}.log",
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
    shell:
        "python workflow/scripts/prepare.py --archive {input.archive} --name {params.name:q}"
        " --image-size {params.image_size} --data-dir {params.data_dir} --info {output.info}"
        " --threads {threads} --builder {params.builder}"
        " > {log} 2>&1"


rule data:
    input:
        PREPARED,
