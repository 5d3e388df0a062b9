# TensorFlow variants: build a wheel from source (when asked), set up and verify each
# variant's environment.


rule build_preflight:
    # What a source build needs (git, bazelisk, the network), checked before hours of Bazel:
    # fails at once with one line naming everything missing.
    output:
        layout.BAZELISK,
    log:
        "resources/logs/build_preflight/{variant}.log",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    params:
        variant=variant_of,
        tools="resources/tools",
    script:
        "../scripts/build_preflight.py"


rule build_tensorflow:
    # TensorFlow's documented Bazel build of the pinned tag, with the variant's copts. The one
    # rule that runs a shell command: git and Bazel, printed in full by `snakemake -n -p`.
    input:
        bazelisk=layout.BAZELISK,
    output:
        wheels=directory(layout.WHEELS),
    log:
        "resources/logs/build_tensorflow/{variant}.log",
    conda:
        "../../envs/mptbench.yaml"
    threads: build_setting("threads")
    resources:
        mem_mb=build_setting("mem_mb"),
        runtime=build_setting("runtime_min"),
    params:
        repository=build_setting("repository"),
        tag=build_setting("tag"),
        bazel_version=build_setting("bazel_version"),
        wheel_name=build_setting("wheel_name"),
        copts=build_copts,
        source_tree=layout.SOURCE_TREE,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
    shell:
        # Every value from the config is quoted ({x:q}): a repository, tag or path with spaces,
        # ';' or '$(...)' stays one argument (tests/jobs/test_source_build.py).
        "(test -d {params.source_tree:q}/.git || git clone --depth 1 --branch {params.tag:q}"
        " {params.repository:q} {params.source_tree:q}) > {log:q} 2>&1"
        " && (cd {params.source_tree:q} && USE_BAZEL_VERSION={params.bazel_version:q}"
        ' "$(cat {input.bazelisk:q})" build //tensorflow/tools/pip_package:wheel'
        " --repo_env=USE_PYWRAP_RULES=1 --repo_env=WHEEL_NAME={params.wheel_name:q}"
        " --repo_env=HERMETIC_PYTHON_VERSION={params.python_version:q} {params.copts}"
        " --local_ram_resources={resources.mem_mb} --jobs={threads}) >> {log:q} 2>&1"
        " && mkdir -p {output.wheels:q} && cp"
        " {params.source_tree:q}/bazel-bin/tensorflow/tools/pip_package/wheel_house/*.whl"
        " {output.wheels:q}/"


rule variant_env:
    # The variant's environment: this one (PyPI wheel) or a venv with its own wheel.
    input:
        wheels=built_wheels,
        requirements="envs/requirements-train.txt",
    output:
        layout.VARIANT_ENV,
    log:
        "resources/logs/variant_env/{variant}.log",
    localrule: True
    conda:
        "../../envs/mptbench.yaml"
    params:
        variant=variant_of,
        venvs=output_dir,
    script:
        "../scripts/variant_env.py"
