#!/usr/bin/env bash
# Compiles LightGBM with its CUDA tree learner through the Dockerfile's `lightgbm-cuda` stage, on the Debian base
# that hack/images/build.sh makes, and caches the wheel outside the repo, keyed by the LightGBM version, the CUDA
# wheels' release and the GPU architectures. No GPU and no NVIDIA image is needed: nvcc comes from PyPI.
#
#   hack/images/lightgbm_cuda.sh           build the wheel if missing; print its path
#   hack/images/lightgbm_cuda.sh --print   print the path without building; exit 1 if it is missing
#
# LIGHTGBM_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES; default "90-real", the H100/H200 this project's GPU runs use;
# empty for LightGBM's full list) and CMAKE_BUILD_PARALLEL_LEVEL (default 2) are passed to the build.
# Cache root: $TABJOB_IMAGE_CACHE, default ~/.cache/tabjob/images (the wheel goes under lightgbm-cuda/).
set -euo pipefail

main() {
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${TABJOB_IMAGE_CACHE:-$HOME/.cache/tabjob/images}
ARCHS=${LIGHTGBM_CUDA_ARCHS-90-real}
JOBS=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

die() { echo "hack/images/lightgbm_cuda.sh: $*" >&2; exit 1; }

# The versions are the Dockerfile's (a single source of truth); the key names them and the architectures.
arg() { sed -n "s/^ARG $1=\(.*\)$/\1/p" "$REPO/Dockerfile" | head -1; }
LIGHTGBM_VERSION=$(arg LIGHTGBM_VERSION)
CUDA_WHEELS=$(arg CUDA_WHEELS)
[[ -n $LIGHTGBM_VERSION && -n $CUDA_WHEELS ]] || die "cannot read LIGHTGBM_VERSION and CUDA_WHEELS from the Dockerfile"
OUT=$CACHE/lightgbm-cuda/lightgbm-$LIGHTGBM_VERSION-cuda$CUDA_WHEELS-${ARCHS:-default}
OUT=${OUT//;/_}

wheel() { compgen -G "$OUT/lightgbm-$LIGHTGBM_VERSION-*.whl" | head -1; }
if [[ -n $(wheel) ]]; then
  wheel
  return 0
fi
[[ ${1-} == --print ]] && { echo "$OUT/lightgbm-$LIGHTGBM_VERSION-<tag>.whl"; return 1; }

read -r BASE_REF _ < <("$HERE/build.sh" --base)
# pip inside the build trusts what the host trusts (a TLS-inspecting proxy's CA, say): the host's bundle is
# mounted over the base's for the RUN steps only, never written into a layer. Debian's pip reads that path.
HOST_CA=()
ca_file=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
[[ -f $ca_file ]] && HOST_CA=(--volume "$ca_file:/etc/ssl/certs/ca-certificates.crt:ro")
BUILDAH=(buildah --root "$CACHE/storage" --runroot "$CACHE/run")
REF=localhost/tabjob/lightgbm-cuda:$LIGHTGBM_VERSION

echo "compiling LightGBM $LIGHTGBM_VERSION with CUDA $CUDA_WHEELS for '${ARCHS:-LightGBM defaults}'," \
  "$JOBS jobs ..." >&2
start=$SECONDS
nice -n 10 "${BUILDAH[@]}" build --network host "${HOST_CA[@]}" --layers --pull-never \
  --build-arg "CUDA_BUILD_IMAGE=$BASE_REF" --build-arg "LIGHTGBM_CUDA_ARCHS=$ARCHS" \
  --build-arg "CMAKE_BUILD_PARALLEL_LEVEL=$JOBS" \
  --target lightgbm-cuda --tag "$REF" --file "$REPO/Dockerfile" "$REPO" >&2

# Copy the wheel out of the image through a mounted working container; stage, then rename.
local ctr mnt stage
ctr=$("${BUILDAH[@]}" from --pull-never "$REF")
mnt=$("${BUILDAH[@]}" mount "$ctr")
mkdir -p "$(dirname "$OUT")"
stage=$(mktemp -d "$(dirname "$OUT")/.stage.XXXXXX")
cp "$mnt"/wheels/lightgbm-"$LIGHTGBM_VERSION"-*.whl "$stage/"
"${BUILDAH[@]}" umount "$ctr" >/dev/null
"${BUILDAH[@]}" rm "$ctr" >/dev/null
rm -rf "$OUT"
mv "$stage" "$OUT"
echo "LightGBM CUDA wheel built in $((SECONDS - start))s" >&2
wheel
}

main "$@"; exit $?
