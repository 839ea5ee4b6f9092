#!/usr/bin/env bash
# Issue #31's work on a lent GPU, one device call at a time (15 minutes of GPU time in all,
# the machine's start included: leave room for a rerun).
#
# Here first, once: bash benchmarks/gpu_wheels.sh   (the wheels the bare machine lacks)
# Then, on the device, carrying .whl, in the repository root:
#   bash benchmarks/gpu_session.sh check      the GPU check (~6 min; timeout_s 560)
#   bash benchmarks/gpu_session.sh profile    this GPU type's measured rows (~3 min)
# And here, before any device call:
#   bash benchmarks/gpu_session.sh rehearse   the check on this CPU as the device runs it:
#       no wheels installed, no compiled loops (the device builds none), cvxpy and its
#       solvers unimportable (the device lacks them); ~7 min on 2 cores
# Anything after the part is passed to gpu_check.py (a rerun of what failed:
# --workloads ..., --parts ...). What comes back under $OUT (at most 8 files): the check's
# gpu_check-TYPE.json, gpu_check.md and its log, its daemons' and jobs' logs as
# gpu_check-TYPE-logs.tgz (checkpoint tensors left out), or the rows TYPE-fp32.json,
# TYPE-bf16.json and profile-TYPE.json. Commit them where benchmarks/gpu_tables.py reads
# them (benchmarks/results/, traces/data/measured/), then regenerate BENCHMARKS.md's GPU
# section with it. GAVEL_NO_WHEELS=1 skips the install.
set -uo pipefail
part=${1:?"usage: gpu_session.sh check|profile|rehearse [gpu_check.py flags...]"}
shift
if [ "$part" = rehearse ]; then
    block=$(mktemp -d)
    for module in cvxpy highspy ecos scs osqp; do
        echo "raise ImportError('$module: not on the GPU machine (a rehearsal)')" \
            > "$block/$module.py"
    done
    GAVEL_NO_WHEELS=1 GAVELSCHED_PURE_PYTHON=1 PYTHONPATH="$block${PYTHONPATH:+:$PYTHONPATH}" \
        exec bash "$0" check --cpu "$@"
fi
if [ "${GAVEL_NO_WHEELS:-0}" != 1 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/gpu_session}
mkdir -p "$OUT"
type=$(python3 -c "
import torch
name = torch.cuda.get_device_name(0).lower() if torch.cuda.is_available() else ''
print(next((t for t in ('h200', 'h100', 'a100', 'l4', 'v100') if t in name),
           'gpu' if name else 'cpu'))")
echo "device type: $type"
case "$part" in
check)
    work=/tmp/gpu_check
    timeout 540 python3 benchmarks/gpu_check.py --type "$type" --out "$work" "$@" 2>&1 \
        | tee "$OUT/gpu_check.log"
    code=${PIPESTATUS[0]}
    cp "$work/gpu_check.json" "$OUT/gpu_check-$type.json" 2>/dev/null
    cp "$work/gpu_check.md" "$OUT/gpu_check.md" 2>/dev/null
    tar czf "$OUT/gpu_check-$type-logs.tgz" --exclude='*.pt' --exclude='*.npz' \
        -C "$work" work 2>/dev/null
    exit "$code"
    ;;
profile)
    python3 benchmarks/profile_row.py --type "$type" --out "$OUT/profile-$type.json"
    code=$?
    cp traces/data/measured/"$type"-*.json "$OUT/" 2>/dev/null
    exit "$code"
    ;;
*)
    echo "gpu_session.sh: the part is check, profile or rehearse, got '$part'" >&2
    exit 2
    ;;
esac
