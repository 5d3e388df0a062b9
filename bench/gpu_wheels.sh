#!/usr/bin/env bash
# Collect the wheels bench/bench_gpu.py needs on a GPU machine without network (its Python:
# PYTHON_VERSION, default 3.12), and say how much they weigh. On that machine:
#   pip install --no-index --no-deps wheels/*.whl && pip install --no-deps -e . (or PYTHONPATH=src)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/.work/wheels}
version=${PYTHON_VERSION:-3.12}
pip=${PIP:-.venv/bin/pip}
mkdir -p "$out"
"$pip" download --quiet --no-deps --only-binary=:all: --python-version "$version" \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$out" -r bench/gpu_wheels.txt
# Hydra's parser runtime is a source archive on PyPI: build its (pure-Python) wheel here.
"$pip" wheel --quiet --no-deps -w "$out" antlr4-python3-runtime==4.9.3
echo "$(ls "$out"/*.whl | wc -l) wheels, $(du -cb "$out"/*.whl | tail -1 | cut -f1) bytes in $out"
