# TensorFlow variants: build a wheel from source (when asked), set up and verify each
# variant's environment.


rule build_tensorflow:
    # TensorFlow's documented Bazel build of the pinned tag, with the variant's copts.
    # Fails at once, naming what is missing, where git, bazelisk or the network is not there.
    output:
        WHEEL_MANIFEST,
    log:
        "resources/logs/build_tensorflow/{variant}.log",
    conda:
        "../../envs/mptbench.yaml"
    threads: build_resource("threads", 16)
    resources:
        mem_mb=build_resource("mem_mb", 32000),
        runtime=build_resource("runtime_min", 480),
    params:
        variant=variant_json,
        repository=build_setting("repository"),
        tag=build_setting("tag"),
        bazel_version=build_setting("bazel_version"),
        wheel_name=build_setting("wheel_name"),
        copts=build_copts,
        source_tree="resources/build/tensorflow-{variant}",
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
    shell:
        "BAZELISK=$(python workflow/scripts/variants.py preflight --name {wildcards.variant}"
        " --variant {params.variant:q} --tools resources/tools 2>> {log})"
        " && (test -d {params.source_tree}/.git || git clone --depth 1 --branch {params.tag}"
        " {params.repository} {params.source_tree}) >> {log} 2>&1"
        " && (cd {params.source_tree} && USE_BAZEL_VERSION={params.bazel_version} $BAZELISK build"
        " //tensorflow/tools/pip_package:wheel --repo_env=USE_PYWRAP_RULES=1"
        " --repo_env=WHEEL_NAME={params.wheel_name}"
        " --repo_env=HERMETIC_PYTHON_VERSION={params.python_version} {params.copts}"
        " --local_ram_resources={resources.mem_mb} --jobs={threads}) >> {log} 2>&1"
        " && python workflow/scripts/variants.py collect --source-tree {params.source_tree}"
        " --dest-dir resources/wheels/{wildcards.variant} --output {output} >> {log} 2>&1"


rule variant_env:
    # The variant's environment: this one (PyPI wheel) or a venv with its own wheel.
    input:
        wheel=built_wheel,
        requirements="envs/requirements-train.txt",
    output:
        VARIANT_ENV,
    log:
        "resources/logs/variant_env/{variant}.log",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    params:
        variant=variant_json,
        wheel_manifest=wheel_manifest_path,
    shell:
        "python workflow/scripts/variants.py env --name {wildcards.variant} --variant {params.variant:q}"
        " --wheel-manifest={params.wheel_manifest:q} --venvs resources/envs"
        " --requirements {input.requirements} --output {output} > {log} 2>&1"
