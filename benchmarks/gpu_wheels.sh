#!/usr/bin/env bash
# The wheels the GPU machine lacks, into .whl/ (git ignores it), for the GPU check (issue #31).
#
# That machine runs CPython 3.12 with torch, numpy, scipy, pyyaml, networkx, psutil, tqdm,
# matplotlib and prometheus-client, and reaches no package index. The check's scheduler
# runs max_min_fairness_perf, whose LP goes to Clarabel directly: besides Clarabel it needs
# grpc and protobuf at the versions our generated code wants. These are fetched here, for
# that platform, at the versions this project is tested with (8.8 MiB). cvxpy and the
# solvers behind it serve other policies only; SCS alone is 42 MiB, and a device call
# carries 64 MiB at most. Then every device call carries .whl and begins with:
#
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit;
#
# Run from the repository root: bash benchmarks/gpu_wheels.sh
set -euo pipefail
WHEELS=(
    clarabel==0.11.1 cffi==2.0.0 pycparser==3.0
    grpcio==1.85.3 grpcio-health-checking==1.85.1 protobuf==7.36.2
)
rm -rf .whl
mkdir -p .whl
for wheel in "${WHEELS[@]}"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 --platform any -d .whl "$wheel"
done
du -sh .whl
