#!/usr/bin/env bash
# LightGBM's sdist from the wheel folder compiled with its CUDA tree learner (-DUSE_CUDA=ON) by this box's nvcc,
# CMake and ninja, offline, then installed into TARGET/site. The wheel is cached (GPU_CACHE, default
# ~/.cache/tabjob/gpu) keyed by LightGBM's version, nvcc's version and the CUDA architectures, so a second run on
# the same box compiles nothing. CUDA_ARCHS defaults to `native`: only the GPU in this box, a few minutes instead
# of LightGBM's seven-architecture default.
#   usage: hack/gpu/build_lightgbm.sh TARGET        (GPU_WHEELS, GPU_PYTHON, GPU_CACHE, CUDA_ARCHS)
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${1:?usage: hack/gpu/build_lightgbm.sh TARGET}
WHEELS=${GPU_WHEELS:-.gpu-wheels}
PY=${GPU_PYTHON:-python3}
CACHE=${GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tabjob/gpu}
ARCHS=${CUDA_ARCHS:-native}
say() { echo "gpu-check: $*" >&2; }

sdist=$(compgen -G "$WHEELS/lightgbm-*.tar.gz" | head -n 1 || true)
if [[ -z $sdist ]]; then
    say "no LightGBM sdist in $WHEELS: run 'make gpu-wheels'"
    exit 1
fi
version=$(basename "$sdist" .tar.gz)
version=${version#lightgbm-}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# CMake from PyPI installs `cmake` as a Python script that pip's isolated build cannot always run; its real binary
# is in the package's data folder, which goes first on PATH where that package is what provides CMake.
cmake_bin=$($PY -c 'import cmake; print(cmake.CMAKE_BIN_DIR)' 2>/dev/null || true)
if [[ -n $cmake_bin && -x $cmake_bin/cmake ]]; then
    export PATH="$cmake_bin:$PATH"
fi
for tool in "$nvcc" cmake ninja; do
    if ! command -v "$tool" >/dev/null; then
        say "$tool not found: compiling LightGBM with CUDA needs CUDA's nvcc, CMake >= 3.28 and ninja on PATH"
        exit 1
    fi
done
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')
if [[ $(printf '%s\n' 3.28 "$cmake_version" | sort -V | head -n 1) != 3.28 ]]; then
    say "CMake $cmake_version is too old: LightGBM $version needs CMake >= 3.28 (offline, pip cannot fetch one)"
    exit 1
fi
cuda=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
arch_key=$ARCHS
if [[ $ARCHS == native ]]; then
    arch_key=sm$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
fi
cached="$CACHE/lightgbm-$version-cuda$cuda-$arch_key"
if ! compgen -G "$cached/lightgbm-*.whl" >/dev/null; then
    say "compiling LightGBM $version with CUDA $cuda for $ARCHS ($nvcc)"
    rm -rf "$cached.partial"
    mkdir -p "$cached.partial"
    started=$(date +%s)
    CUDACXX=$nvcc $PY -m pip wheel -q --disable-pip-version-check --no-index --find-links "$WHEELS" --no-deps \
        --config-settings=cmake.define.USE_CUDA=ON \
        --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES="$ARCHS" \
        -w "$cached.partial" "$sdist"
    rm -rf "$cached"
    mv "$cached.partial" "$cached"
    say "LightGBM compiled in $(($(date +%s) - started)) s"
fi
$PY -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --upgrade \
    --target "$target/site" "$cached"/lightgbm-*.whl
# Proof the build has the CUDA learner before any test relies on it.
PYTHONPATH="$target/site${PYTHONPATH:+:$PYTHONPATH}" $PY - <<'PY'
import lightgbm as lgb
import numpy as np

x = np.random.default_rng(0).random((256, 4))
lgb.train({"device_type": "cuda", "objective": "binary", "verbose": -1}, lgb.Dataset(x, x[:, 0] > 0.5), 2)
print(f"gpu-check: LightGBM {lgb.__version__} from {lgb.__file__} trains with device_type=cuda")
PY
# Again in the order the trainer imports things (numpy first). On the H200 box of 2026-11-26 the self-compiled
# build crashed there (SIGSEGV in LGBM_DatasetCreateFromMat, on CPU and CUDA alike) and only there: with
# lib_lightgbm.so loaded before numpy and its friends (lightgbm's own import does that when it comes first, and so
# does LD_PRELOAD) it trained; preloading either libgomp, one OpenMP thread or more static TLS did not help. So
# where the trainer's order crashes and the preloaded one trains, the library's path goes to TARGET/lightgbm-preload
# and check.sh preloads it for every test and benchmark, saying so; a build that crashes even then fails here.
prove_numpy_first() {
    env PYTHONPATH="$target/site${PYTHONPATH:+:$PYTHONPATH}" "$@" $PY -c '
import numpy as np
import lightgbm as lgb
x = np.random.default_rng(0).random((256, 4))
lgb.train({"device_type": "cuda", "objective": "binary", "verbose": -1}, lgb.Dataset(x, x[:, 0] > 0.5), 2)
' 2>/dev/null
}
rm -f "$target/lightgbm-preload"
if ! prove_numpy_first; then
    lib=$(compgen -G "$target/site/lightgbm/lib/lib_lightgbm.so" | head -n 1 || true)
    if [[ -n $lib ]] && prove_numpy_first LD_PRELOAD="$lib"; then
        echo "$lib" >"$target/lightgbm-preload"
        say "this LightGBM build crashes when numpy is imported before it (the trainer's order) and trains with"
        say "  lib_lightgbm.so preloaded: the check preloads it (README.md, \"GPU check\", known problem)"
    else
        say "this LightGBM build crashes when numpy is imported before it, even with lib_lightgbm.so preloaded"
        exit 1
    fi
fi
