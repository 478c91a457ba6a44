#!/usr/bin/env bash
# Fills the GPU wheel folder (default .gpu-wheels, git-ignored) for `make gpu-check` on a box without network:
# the wheels in requirements.txt and build-requirements.txt for each Python in GPU_PYTHONS (a box installs the
# ones for its own Python), and LightGBM's source distribution, which the box compiles with its own nvcc.
# Never torch, numpy & co.: a GPU box has them, built for its driver. Run here, where PyPI is reachable.
set -euo pipefail
cd "$(dirname "$0")/../.."

WHEELS=${GPU_WHEELS:-.gpu-wheels}
PYTHONS=${GPU_PYTHONS:-3.10 3.11 3.12 3.13}
PIP=${PIP:-python3 -m pip}
# The same LightGBM as the trainer image (Dockerfile) so a GPU run measures what ships.
LIGHTGBM_VERSION=${LIGHTGBM_VERSION:-4.7.0}
LIMIT_MIB=64  # what travels with the working tree to a lent GPU machine, at most

staging="$WHEELS.partial"
rm -rf "$staging"
mkdir -p "$staging"
for py in $PYTHONS; do
    $PIP download -q --only-binary=:all: --python-version "$py" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$staging" -r hack/gpu/requirements.txt -r hack/gpu/build-requirements.txt
done
# --no-binary for lightgbm alone: its build requirements still come as wheels (`:all:` would compile CMake).
$PIP download -q --no-deps --no-binary lightgbm "lightgbm==$LIGHTGBM_VERSION" -d "$staging"
# TABM's modules, pure Python over torch: --no-deps, or pip would bring a torch to replace the box's own.
$PIP download -q --no-deps tabm==0.0.3 rtdl_num_embeddings==0.0.12 -d "$staging"
if compgen -G "$staging/torch-*" >/dev/null; then
    echo "gpu-wheels: a torch wheel got into $staging; the GPU box's own torch must never be replaced" >&2
    exit 1
fi
size_kib=$(du -sk "$staging" | cut -f1)
if (( size_kib > LIMIT_MIB * 1024 )); then
    echo "gpu-wheels: $staging holds $((size_kib / 1024)) MiB, over the ${LIMIT_MIB} MiB that travel to a GPU box" >&2
    exit 1
fi
rm -rf "$WHEELS"
mv "$staging" "$WHEELS"
echo "gpu-wheels: $WHEELS holds $(find "$WHEELS" -type f | wc -l) files, $((size_kib / 1024)) MiB (limit ${LIMIT_MIB} MiB)"
