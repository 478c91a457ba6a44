#!/usr/bin/env bash
# Fails early, naming what needs the room, when a cold build would fill the disk halfway through.
#
#   hack/need_disk.sh GIB DIR WHAT      GIB may have a decimal (7.4): the check is in MiB, as measured
#
# A cold `make test` writes a virtualenv of 7.35 GiB (PyPI's torch is the CUDA build, with NVIDIA's libraries) that
# peaks at 11.4 GiB while pip holds the downloaded wheels, and a 3.6 GB trainer image archive (hack/build_order.sh
# decides whether both fit at once). Out of room, pip stops mid-install with "[Errno 28] No space left on device"
# and leaves a half-written virtualenv; this says so before anything is written.
# TABJOB_SKIP_DISK_CHECK=1 skips it (a filesystem that reports its free space wrongly).
set -euo pipefail
need_gib=$1 dir=$2 what=$3
[[ ${TABJOB_SKIP_DISK_CHECK:-0} == 1 ]] && exit 0
mkdir -p "$dir"
free_kib=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
need_mib=$(awk -v g="$need_gib" 'BEGIN {printf "%d", g * 1024}')
free_gib=$(awk -v k="$free_kib" 'BEGIN {printf "%.1f", k / 1048576}')
if ((free_kib / 1024 < need_mib)); then
  echo "need_disk: $what needs about $need_gib GiB free under $dir; $free_gib GiB free there." >&2
  echo "need_disk: free some room (old checkouts' .venv, ~/.cache/tabjob/images/*.oci.tar of other versions," >&2
  echo "need_disk: ~/.cache/pip) or set TABJOB_SKIP_DISK_CHECK=1 to try anyway." >&2
  exit 1
fi
