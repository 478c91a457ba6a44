#!/usr/bin/env bash
# Decides how `make test` builds what is cold: the virtualenv and the images side by side (the fastest), the
# virtualenv first and the images after it (when the disk holds each build's peak but not both at once), or not
# at all, naming the room it needs (when even one after the other would fill the disk halfway through).
#
#   hack/build_order.sh                                  prints "parallel" or "venv-first", or fails
#   hack/build_order.sh decide FREE VENV_COLD IMAGES_COLD STALE   the same from given figures (MiB, 0/1, 0/1, MiB)
#
# The figures, measured on the test bed (2 cores, pip's wheels from PyPI):
#   the virtualenv peaks at 11.4 GiB (the downloaded wheels beside the installed tree) and keeps 7.35 GiB;
#   the trainer image build peaks at 7.4 GiB (staged layers and the new archive), less the trainer archives of
#   other keys that it removes before it starts (STALE, from hack/images/build.sh --stale-mib).
# In MiB, not whole GiB: rounding each figure up and the free space down once refused a CI machine with 12 GiB free
# whose builds, one after the other, peak at 11.4.
# TABJOB_SKIP_DISK_CHECK=1 skips the check and builds side by side (a filesystem that reports its free space wrongly).
set -euo pipefail

VENV_PEAK=11674 # 11.4 GiB
VENV_KEPT=7526  # 7.35 GiB
IMAGES_PEAK=7578 # 7.4 GiB

gib() { awk -v m="$1" 'BEGIN {printf "%.1f", m / 1024}'; }

decide() {
  local free=$1 venv_cold=$2 images_cold=$3 stale=$4
  local images=0 venv=0 kept=0
  ((images_cold)) && images=$((IMAGES_PEAK - stale > 0 ? IMAGES_PEAK - stale : 0))
  ((venv_cold)) && venv=$VENV_PEAK && kept=$VENV_KEPT
  if ((free >= venv + images)); then
    echo parallel
    return 0
  fi
  # One after the other: the virtualenv's peak alone, then what it keeps beside the images' peak.
  local sequential=$((venv > kept + images ? venv : kept + images))
  if ((venv_cold && images_cold && free >= sequential)); then
    echo venv-first
    return 0
  fi
  local need what
  if ((venv_cold && images_cold)); then
    need=$sequential what="the virtualenv (.venv) and then the images, one after the other,"
  elif ((venv_cold)); then
    need=$venv what="a new virtualenv (.venv)"
  else
    need=$images what="the trainer image build"
  fi
  echo "build_order: $what needs about $(gib "$need") GiB free under $PWD; $(gib "$free") GiB free there." >&2
  echo "build_order: free some room (old checkouts' .venv, ~/.cache/tabjob/images/*.oci.tar of other versions," >&2
  echo "build_order: ~/.cache/pip) or set TABJOB_SKIP_DISK_CHECK=1 to try anyway." >&2
  return 1
}

if [[ ${1-} == decide ]]; then
  shift
  decide "$@"
  exit $?
fi

if [[ ${TABJOB_SKIP_DISK_CHECK:-0} == 1 ]]; then
  echo parallel
  exit 0
fi
venv_cold=0 images_cold=0 stale=0
test -x .venv/bin/python || venv_cold=1
if ! hack/images/build.sh --print >/dev/null 2>&1; then
  images_cold=1
  stale=$(hack/images/build.sh --stale-mib)
fi
free_kib=$(df -Pk . | awk 'NR == 2 {print $4}')
decide $((free_kib / 1024)) "$venv_cold" "$images_cold" "$stale"
