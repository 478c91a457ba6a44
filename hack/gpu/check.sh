#!/usr/bin/env bash
# `make gpu-check`: every GPU path of tabjob run on a real GPU, offline, the same way on any GPU box.
#
#   1. refuses at once, with the reason, where no CUDA device is visible (nothing installed, nothing run);
#   2. installs tabjob and its pure-Python requirements from the wheel folder (hack/gpu/install.sh);
#   3. compiles LightGBM's sdist with -DUSE_CUDA=ON with this box's nvcc (hack/gpu/build_lightgbm.sh);
#   4. runs the GPU tests (junit XML) and the GPU benchmarks (JSON), and saves nvidia-smi's view of GPU and driver.
#
#   usage: hack/gpu/check.sh [tests] [bench]     (default both; one part alone fits a time-limited session, and
#                                                  the second call reuses the cached LightGBM build; GPU_BENCHES
#                                                  names the benchmarks to run, in order, default all four)
#
# Results go to TABJOB_GPU_RESULTS, else $OUT when set, else gpu-results/. Work files go to TABJOB_GPU_WORK
# (default: a fresh temporary folder). The box needs NVIDIA's driver, PyTorch with CUDA, numpy, pandas, pyarrow,
# scipy, scikit-learn, nvcc, CMake >= 3.28 and ninja; everything else comes from GPU_WHEELS (`make gpu-wheels`).
set -uo pipefail
cd "$(dirname "$0")/../.."

parts=" ${*:-tests bench} "
for part in $parts; do
    if [[ $part != tests && $part != bench ]]; then
        echo "gpu-check: unknown part '$part'; the parts are: tests bench" >&2
        exit 1
    fi
done

ALL_BENCHES="gpu_tabm gpu_lightgbm gpu_torch gpu_packing"
BENCHES=${GPU_BENCHES:-$ALL_BENCHES}
for bench in $BENCHES; do
    if [[ " $ALL_BENCHES " != *" $bench "* ]]; then
        echo "gpu-check: unknown benchmark '$bench' in GPU_BENCHES; they are: $ALL_BENCHES" >&2
        exit 1
    fi
done

PY=${GPU_PYTHON:-python3}
export GPU_PYTHON=$PY
RESULTS=${TABJOB_GPU_RESULTS:-${OUT:-gpu-results}}
say() { echo "gpu-check: $*" >&2; }
no_gpu() {
    say "no CUDA device is visible: $1. Run it on a machine with an NVIDIA GPU and its driver; nothing was installed or run."
    exit 2
}

# 1. A GPU, before anything else.
if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
    visible=${CUDA_VISIBLE_DEVICES//[[:space:]]/}
    if [[ -z $visible || $visible == -1* ]]; then
        no_gpu "CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU"
    fi
fi
if ! command -v nvidia-smi >/dev/null; then
    no_gpu "nvidia-smi is not on PATH (no NVIDIA driver)"
fi
if ! listing=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$listing"; then
    no_gpu "nvidia-smi lists no GPU (${listing//$'\n'/ })"
fi
if ! command -v "$PY" >/dev/null; then
    say "$PY not found: set GPU_PYTHON to the Python that holds this box's PyTorch"
    exit 1
fi
if ! why=$($PY -c 'import torch, sys; ok = torch.cuda.is_available(); print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees {torch.cuda.device_count()} GPU(s)"); sys.exit(0 if ok else 1)' 2>&1); then
    no_gpu "$PY's PyTorch cannot use it: ${why##*$'\n'}"
fi
say "$why"

set -e
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
WORK=${TABJOB_GPU_WORK:-$(mktemp -d -t tabjob-gpu.XXXXXX)}
mkdir -p "$WORK"
exec > >(tee "$RESULTS/gpu-check.log") 2>&1
nvidia-smi >"$RESULTS/nvidia-smi.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv >>"$RESULTS/nvidia-smi.txt"

# 2 and 3. Offline installs into $WORK/site, put first on the path of everything below.
hack/gpu/install.sh "$WORK"
hack/gpu/build_lightgbm.sh "$WORK"
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$WORK/site/bin:$PATH"
if [[ -s $WORK/lightgbm-preload ]]; then
    # build_lightgbm.sh found this build crashing unless its library loads before numpy's (README.md, known problem)
    export LD_PRELOAD="$(cat "$WORK/lightgbm-preload")${LD_PRELOAD:+:$LD_PRELOAD}"
    say "LD_PRELOAD=$LD_PRELOAD for every test and benchmark below"
fi

# 4. Tests first (a failing test fails the check), then the benchmarks, which run even after a failed test so
# one broken path does not hide every figure.
rc=0
if [[ $parts == *' tests '* ]]; then
    # The GPU tests, and the check's own tests (the offline install again, the refusal with CUDA hidden). The
    # benchmarks' tiny CPU-only runs (tests/gpu/test_benchmarks.py) are left out: the benchmarks below run in full.
    # The pod's entry first (LightGBM's CUDA learner and TabM without the preload): what a short lease must see.
    $PY -m pytest -v -p no:cacheprovider --junitxml="$RESULTS/gpu-tests.xml" \
        tests/trainer/test_gpu_entry.py tests/trainer/test_gpu.py tests/trainer/test_gpu_families.py \
        "tests/trainer/test_tabm.py::test_tabm_trains_on_the_gpu_with_amp_and_says_so" \
        tests/gpu/test_check_script.py || rc=$?
fi
if [[ $parts == *' bench '* ]]; then
    for bench in $BENCHES; do
        rm -f "$RESULTS/$bench.json"
        brc=0
        $PY -m "bench.$bench" --output "$RESULTS" || brc=$?
        if (( brc != 0 )); then
            rc=$brc
            # A benchmark that dies (a signal from a native library) writes no JSON; this record of how it ended
            # goes into BENCHMARKS.md instead of a silent gap.
            $PY -m bench.gpu_render --failed "$bench" --exit-code "$brc" --results "$RESULTS" || true
        fi
    done
fi
$PY -m bench.gpu_render --results "$RESULTS" || rc=$?
if (( rc != 0 )); then
    say "FAILED (exit $rc); results in $RESULTS"
    exit "$rc"
fi
say "passed; results in $RESULTS (copy $RESULTS/gpu_*.json to bench/results/ and run"
say "  'python -m bench.gpu_render --write' to put the figures into BENCHMARKS.md)"
