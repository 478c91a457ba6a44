#!/usr/bin/env bash
# Builds the images the local cluster runs, with buildah (no Docker daemon, no registry), and caches each as an OCI
# archive outside the repo, named by a hash of everything that goes into it, so a second run builds nothing.
#
#   hack/images/build.sh            build what is missing; print one line per image: <ref> <oci-archive path>
#   hack/images/build.sh --print    print the same lines without building; exit 1 if any archive is missing
#   hack/images/build.sh --key      print only the combined content key (cheap: hashes files, runs no build)
#   hack/images/build.sh --base     build (if missing) and print only the base image's line
#   hack/images/build.sh --stale-mib  print the MiB of trainer archives of other keys (a trainer build
#                                   removes them before it starts, so that room counts as free for it)
#
# Images (the Dockerfile's targets, on a Debian base made here since no registry is reachable):
#   localhost/tabjob/python-base:bookworm     Debian bookworm rootfs from mmdebstrap (python3, venv, pip, libgomp1)
#   ghcr.io/tabjob/tabjob-operator:0.1.0      Dockerfile target `operator` on that base (PYTHON_IMAGE build arg)
#   ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu   Dockerfile target `trainer-cpu` on that base
#
# Cache root: $TABJOB_IMAGE_CACHE, default ~/.cache/tabjob/images. buildah keeps its own layer store under it
# (storage/), apart from any other buildah user on the machine. pip inside the build reaches PyPI through the
# host's network (--network host); nothing else is fetched during a build.
set -Eeuo pipefail
# A failing step says where, instead of ending make's job with a bare "Error 2".
trap 'echo "hack/images/build.sh: exit $? at line $LINENO: $BASH_COMMAND" >&2' ERR

# The whole script is one function, run on its last line, so bash has read all of it before it starts: editing the
# file during a long build cannot change what the running build does (the exit sits on the same line as the call).
main() {

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${TABJOB_IMAGE_CACHE:-$HOME/.cache/tabjob/images}
MODE=build
case ${1-} in
  --print) MODE=print ;;
  --key) MODE=key ;;
  --base) MODE=base ;;
  --stale-mib) MODE=stale ;;
  "") ;;
  *) echo "usage: $0 [--print|--key|--base|--stale-mib]" >&2; exit 2 ;;
esac

die() { echo "hack/images/build.sh: $*" >&2; exit 1; }

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/pyproject.toml" | head -1)
[[ -n $VERSION ]] || die "cannot read the version from pyproject.toml"

# The base: what mmdebstrap installs. Changing this list or build_base() below changes the base's key and so every
# image built on it.
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,python3-pip,ca-certificates,netcat-openbsd,libgomp1
BASE_REF=localhost/tabjob/python-base:$SUITE
OPERATOR_REF=ghcr.io/tabjob/tabjob-operator:$VERSION
TRAINER_REF=ghcr.io/tabjob/tabjob-trainer:$VERSION-cpu
# KServe's storage initializer, for the test bed's serving e2e (not a tabjob image: its own Dockerfile, no context).
STORAGE_DOCKERFILE=$REPO/hack/images/storage-initializer.Dockerfile
STORAGE_REF=localhost/kserve/storage-initializer:0.21.0

sha() { sha256sum | cut -c1-16; }

# The files the Dockerfile's build context holds (.dockerignore keeps pyproject.toml, README.md, operator/,
# trainer/), hashed by path and content; caches and bytecode are skipped as .dockerignore skips them.
context_hash() {
  (cd "$REPO" && find Dockerfile .dockerignore pyproject.toml README.md operator trainer -type f \
      -not -path '*/__pycache__/*' -not -name '*.pyc' -not -path '*.egg-info/*' -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum) | sha
}

BASE_KEY=$( { echo "$SUITE $BASE_PACKAGES"; sed -n '/^build_base()/,/^}/p' "$0"; } | sha)
CONTEXT_KEY=$(context_hash)
OPERATOR_KEY=$(echo "operator $BASE_KEY $CONTEXT_KEY" | sha)
TRAINER_KEY=$(echo "trainer-cpu $BASE_KEY $CONTEXT_KEY" | sha)
STORAGE_KEY=$( { echo "storage-initializer $BASE_KEY"; cat "$STORAGE_DOCKERFILE"; } | sha)

BASE_TAR=$CACHE/python-base-$SUITE-$BASE_KEY.oci.tar
OPERATOR_TAR=$CACHE/tabjob-operator-$VERSION-$OPERATOR_KEY.oci.tar
TRAINER_TAR=$CACHE/tabjob-trainer-$VERSION-cpu-$TRAINER_KEY.oci.tar
STORAGE_TAR=$CACHE/storage-initializer-0.21.0-$STORAGE_KEY.oci.tar

print_lines() {
  echo "$BASE_REF $BASE_TAR"
  echo "$OPERATOR_REF $OPERATOR_TAR"
  echo "$TRAINER_REF $TRAINER_TAR"
  echo "$STORAGE_REF $STORAGE_TAR"
}

if [[ $MODE == key ]]; then
  echo "$OPERATOR_KEY-$TRAINER_KEY"
  return 0
fi

# Trainer archives of other keys (or versions): ~3.6 GB each.
stale_trainer_archives() {
  local f
  for f in "$CACHE"/tabjob-trainer-*.oci.tar; do
    [[ -f $f && $f != "$TRAINER_TAR" ]] && echo "$f"
  done
  return 0
}
if [[ $MODE == stale ]]; then
  stale_bytes=0
  while read -r f; do stale_bytes=$((stale_bytes + $(stat -c %s "$f"))); done < <(stale_trainer_archives)
  echo $((stale_bytes / 1024 / 1024))
  return 0
fi
if [[ $MODE == base && -f $BASE_TAR ]] || [[ -f $BASE_TAR && -f $OPERATOR_TAR && -f $TRAINER_TAR && -f $STORAGE_TAR ]]; then
  [[ $MODE == base ]] && { echo "$BASE_REF $BASE_TAR"; return 0; }
  print_lines
  return 0
fi
[[ $MODE == print ]] && { print_lines; return 1; }

[[ $(id -u) == 0 ]] || die "mmdebstrap and buildah's layer store need root here (run as root)"
# Both are Debian packages (runc comes with buildah); a fresh Debian machine gets them here.
missing=0
for tool in buildah mmdebstrap runc; do command -v "$tool" >/dev/null 2>&1 || missing=1; done
if [[ $missing == 1 ]]; then
  command -v apt-get >/dev/null 2>&1 || die "buildah, mmdebstrap and runc are needed (Debian packages of those names)"
  echo "installing buildah, mmdebstrap and runc (apt-get) ..." >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah mmdebstrap runc; } >&2 \
    || die "apt-get install buildah mmdebstrap runc failed"
fi

# pip inside the build trusts what the host trusts (a TLS-inspecting proxy's CA, say): the host's bundle is
# mounted over the base's for the RUN steps only, never written into a layer. Debian's pip reads that path.
HOST_CA=()
ca_file=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
[[ -f $ca_file ]] && HOST_CA=(--volume "$ca_file:/etc/ssl/certs/ca-certificates.crt:ro")
mkdir -p "$CACHE"
BUILDAH=(buildah --root "$CACHE/storage" --runroot "$CACHE/run")

# Write an image to an OCI archive under a temporary name, then rename, so an interrupted build never leaves a
# half-written cache entry.
save() {
  local ref=$1 tar=$2 prefix=$3
  "${BUILDAH[@]}" push --quiet "$ref" "oci-archive:$SCRATCH/out.tar:$ref" >/dev/null
  prune_archives "$prefix"
  # The image id beside the archive lets tests/images/test_images.py run the image from this layer store
  # without unpacking gigabytes of archive again.
  "${BUILDAH[@]}" inspect --type image --format '{{.FromImageID}}' "$ref" > "$tar.id"
  mv "$SCRATCH/out.tar" "$tar"
}

# Every change to operator/ or trainer/ makes a new key, and a trainer archive is ~3 GB: a day of edits would fill
# the disk. Keep the newest archive of each image besides the one being written (another checkout sharing this
# cache may still be on its previous key: it rebuilds if it needs an older one).
prune_archives() {
  local prefix=$1 old
  # `|| true`: on a first build there is no archive, ls exits 2, and pipefail would end the script.
  old=$(ls -1t "$CACHE/$prefix"-*.oci.tar 2>/dev/null | tail -n +2) || true
  [[ -z $old ]] || { echo "$old" | while read -r f; do rm -f "$f" "$f.id"; done; }
}

# Interrupted builds leave their working containers, and each pins a whole image (gigabytes). The store is this
# script's own and the build lock is held, so none is in use (tests/images names its short-lived ones tabjob-test-*).
# Untagged images stay: they are the --layers cache that lets a code change rebuild only the last layers.
prune_containers() {
  "${BUILDAH[@]}" containers --format '{{.ContainerName}}' | grep -- 'working-container$' \
    | xargs -r "${BUILDAH[@]}" rm >/dev/null 2>&1 || true
}

# A build killed by a signal (make stopping its other jobs when one fails) skips the EXIT trap and leaves its
# scratch directory, with a half-written archive of up to 3 GB. The lock is held, so no other build owns one.
prune_scratch() {
  find "$CACHE" -maxdepth 1 -name '.scratch.*' ! -path "$SCRATCH" -exec rm -rf {} + 2>/dev/null || true
}

build_base() {
  # minbase: only Essential packages plus the list, no recommends; apt's lists and caches are dropped.
  nice -n 5 mmdebstrap --quiet --variant=minbase --include="$BASE_PACKAGES" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    "$SUITE" "$SCRATCH/rootfs.tar"
  local ctr
  ctr=$("${BUILDAH[@]}" from scratch)
  "${BUILDAH[@]}" add --quiet "$ctr" "$SCRATCH/rootfs.tar" / >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd '["python3"]' "$ctr"
  "${BUILDAH[@]}" commit --quiet "$ctr" "$BASE_REF" >/dev/null
  "${BUILDAH[@]}" rm "$ctr" >/dev/null
  rm -f "$SCRATCH/rootfs.tar"
}

build_file() {
  local file=$1 ref=$2
  "${BUILDAH[@]}" tag "$("${BUILDAH[@]}" pull --quiet "oci-archive:$BASE_TAR")" "$BASE_REF"
  nice -n 5 "${BUILDAH[@]}" build --quiet --network host "${HOST_CA[@]}" --layers --pull-never \
    --build-arg "PYTHON_IMAGE=$BASE_REF" --tag "$ref" --file "$file" "$SCRATCH" >/dev/null
}

build_target() {
  local target=$1 ref=$2
  # The base comes from its archive (never from a registry): pull it into this layer store first.
  local id
  id=$("${BUILDAH[@]}" pull --quiet "oci-archive:$BASE_TAR")
  "${BUILDAH[@]}" tag "$id" "$BASE_REF"
  nice -n 5 "${BUILDAH[@]}" build --quiet --network host "${HOST_CA[@]}" --layers --pull-never \
    --build-arg "PYTHON_IMAGE=$BASE_REF" --target "$target" --tag "$ref" \
    --file "$REPO/Dockerfile" "$REPO" >/dev/null
}

# One build at a time per cache: checkouts side by side share the layer store and the archives.
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  echo "waiting for another build using $CACHE ..." >&2
  flock 9
fi
# Made under the lock, so a build's scratch directory is never one that prune_scratch below would take.
SCRATCH=$(mktemp -d "$CACHE/.scratch.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
# buildah stages blobs in $TMPDIR (default /var/tmp). A killed build leaves gigabytes there that nothing would
# ever remove; inside the scratch directory, prune_scratch takes them with the rest.
export TMPDIR=$SCRATCH
trap 'exit 143' TERM
trap 'exit 130' INT
prune_containers
prune_scratch
# At the push, buildah stages the image's compressed layers in the scratch directory and writes the archive beside
# them: ~3.6 GB each for the trainer, besides its new layers in the store (7.4 GiB at the peak on the test bed).
# `--base` builds only the base (a few hundred MB): asking it for the trainer's room failed a test on a machine with
# 7 GiB free that had room for everything the base needs.
if [[ $MODE == base ]]; then
  [[ -f $BASE_TAR ]] || "$REPO/hack/need_disk.sh" 2 "$CACHE" "the base image build (mmdebstrap's tree and its archive)"
elif [[ ! -f $TRAINER_TAR ]]; then
  # Every trainer archive of another key goes before the build rather than one being kept for another checkout:
  # a checkout on an older key rebuilds it from the layer store in about a minute and a half, while keeping it
  # costs 3.6 GB at the very moment the build needs the most room (a CI machine with 16 GiB free refused to start).
  stale_trainer_archives | while read -r f; do rm -f "$f" "$f.id"; done
  "$REPO/hack/need_disk.sh" 7.4 "$CACHE" "the trainer image build (its staged layers and a ~3.6 GB archive)"
fi
start=$SECONDS
if [[ ! -f $BASE_TAR ]]; then
  echo "building $BASE_REF (mmdebstrap) ..." >&2
  build_base
  save "$BASE_REF" "$BASE_TAR" "python-base-$SUITE"
fi
[[ $MODE == base ]] && { echo "$BASE_REF $BASE_TAR"; return 0; }
if [[ ! -f $OPERATOR_TAR ]]; then
  echo "building $OPERATOR_REF ..." >&2
  build_target operator "$OPERATOR_REF"
  save "$OPERATOR_REF" "$OPERATOR_TAR" "tabjob-operator-$VERSION"
fi
if [[ ! -f $TRAINER_TAR ]]; then
  echo "building $TRAINER_REF ..." >&2
  build_target trainer-cpu "$TRAINER_REF"
  save "$TRAINER_REF" "$TRAINER_TAR" "tabjob-trainer-$VERSION-cpu"
fi
if [[ ! -f $STORAGE_TAR ]]; then
  echo "building $STORAGE_REF ..." >&2
  build_file "$STORAGE_DOCKERFILE" "$STORAGE_REF"
  save "$STORAGE_REF" "$STORAGE_TAR" "storage-initializer-0.21.0"
fi
echo "images built in $((SECONDS - start))s" >&2
print_lines
}

main "$@"; exit $?
