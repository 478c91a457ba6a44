#!/usr/bin/env bash
# Builds the test cluster's binaries from the pinned Go tool modules in hack/cluster/tools/* and caches them
# outside the repo, keyed by component and version, so a second run (or another clone) builds nothing.
#
#   hack/cluster/build.sh            build what is missing, print the bin directories
#   hack/cluster/build.sh --print    only print the bin directories (no build); exit 1 if any is missing
#
# Cache root: $TABJOB_CLUSTER_CACHE, default ~/.cache/tabjob/cluster.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS=$HERE/tools
CACHE=${TABJOB_CLUSTER_CACHE:-$HOME/.cache/tabjob/cluster}
PRINT_ONLY=0
[[ ${1-} == --print ]] && PRINT_ONLY=1

die() { echo "hack/cluster/build.sh: $*" >&2; exit 1; }

# The version a tool module pins, read from its go.mod so there is a single source of truth.
pinned() { awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { v = ($1 == m) ? $2 : $3 } END { print v }' "$1"; }

K8S_VERSION=$(pinned "$TOOLS/k8s/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(pinned "$TOOLS/etcd/go.mod" go.etcd.io/etcd/server/v3)
HELM_VERSION=$(pinned "$TOOLS/helm/go.mod" helm.sh/helm/v4)
COREDNS_VERSION=$(pinned "$TOOLS/coredns/go.mod" github.com/coredns/coredns)
KUEUE_VERSION=$(pinned "$TOOLS/kueue/go.mod" sigs.k8s.io/kueue)
PROMOP_MODULE=github.com/prometheus-operator/prometheus-operator
PROMOP_VERSION=$(pinned "$TOOLS/prometheus-operator/go.mod" $PROMOP_MODULE)
[[ -n $K8S_VERSION && -n $ETCD_VERSION && -n $HELM_VERSION && -n $COREDNS_VERSION && -n $KUEUE_VERSION &&
  -n $PROMOP_VERSION ]] ||
  die "cannot read pinned versions from $TOOLS/*/go.mod"
# The node programs are this repository's own code: keyed by the digest of their sources, not a version.
NODE_KEY=$(cd "$TOOLS/node" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)

K8S_BIN=$CACHE/kubernetes-$K8S_VERSION/bin
ETCD_BIN=$CACHE/etcd-$ETCD_VERSION/bin
HELM_BIN=$CACHE/helm-$HELM_VERSION/bin
COREDNS_BIN=$CACHE/coredns-$COREDNS_VERSION/bin
NODE_BIN=$CACHE/node-$NODE_KEY/bin
# Kueue: its controller (bin/kueue) and, beside it, the Helm chart of the same module version (chart/kueue), copied
# out of the Go module cache so the cluster installs it even after `go clean -modcache`.
KUEUE_DIR=$CACHE/kueue-$KUEUE_VERSION
KUEUE_BIN=$KUEUE_DIR/bin
KUEUE_CHART=$KUEUE_DIR/chart/kueue
# prometheus-operator's PodMonitor and ServiceMonitor CRDs (no controller): the serving e2e creates the PodMonitor
# that `tabjob export --format kserve --pod-monitor` writes, so the API server checks it against the real schema.
PROMOP_CRDS=$CACHE/prometheus-operator-$PROMOP_VERSION/crds
PROMOP_FILES=(monitoring.coreos.com_podmonitors.yaml monitoring.coreos.com_servicemonitors.yaml)
have_crds() { for f in "${PROMOP_FILES[@]}"; do [[ -f $PROMOP_CRDS/$f ]] || return 1; done; }

have_all() { local dir=$1; shift; for b in "$@"; do [[ -x $dir/$b ]] || return 1; done; }

print_dirs() {
  echo "K8S_BIN=$K8S_BIN"; echo "ETCD_BIN=$ETCD_BIN"; echo "HELM_BIN=$HELM_BIN"
  echo "COREDNS_BIN=$COREDNS_BIN"; echo "NODE_BIN=$NODE_BIN"
  echo "KUEUE_BIN=$KUEUE_BIN"; echo "KUEUE_CHART=$KUEUE_CHART"; echo "PROMOP_CRDS=$PROMOP_CRDS"
}

K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
if have_all "$K8S_BIN" "${K8S_CMDS[@]}" && have_all "$ETCD_BIN" etcd && have_all "$HELM_BIN" helm &&
  have_all "$COREDNS_BIN" coredns && have_all "$NODE_BIN" deviceplugin toolbox && have_all "$KUEUE_BIN" kueue &&
  [[ -f $KUEUE_CHART/Chart.yaml ]] && have_crds; then
  print_dirs
  exit 0
fi
[[ $PRINT_ONLY == 1 ]] && { print_dirs; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is not installed (need Go >= 1.26 on PATH) to build the cluster binaries."

# Resolve modules first so an unreachable proxy fails here with a clear message, not deep inside a build.
download() {
  local mod=$1
  if ! (cd "$mod" && go mod download 2>"$CACHE/.download.err"); then
    cat "$CACHE/.download.err" >&2
    die "cannot download the modules of $mod from the Go module proxy ($(go env GOPROXY)); is it reachable?"
  fi
}

# go build into a staging dir, then rename, so an interrupted build never leaves a half-written cache entry. One
# `go build` for all of a module's commands: Go then compiles their shared packages once and links the binaries in
# parallel, where a build per command would leave a core idle during each long link.
build() {
  local mod=$1 out=$2 ldflags=$3; shift 3
  local stage
  stage=$(mktemp -d "$CACHE/.stage.XXXXXX")
  echo "building $(for pkg in "$@"; do basename "$pkg"; done | paste -sd' ') ..." >&2
  (cd "$mod" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w $ldflags" -o "$stage/" "$@")
  mkdir -p "$(dirname "$out")"
  rm -rf "$out"
  chmod 755 "$stage"
  mv "$stage" "$out"
}

mkdir -p "$CACHE"
start=$SECONDS

if ! have_all "$K8S_BIN" "${K8S_CMDS[@]}"; then
  download "$TOOLS/k8s"
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  # The same variables hack/lib/version.sh sets, for both component-base and client-go, so servers and
  # `kubectl version` report the real release.
  ldflags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  build "$TOOLS/k8s" "$K8S_BIN" "$ldflags" "${K8S_CMDS[@]/#/k8s.io/kubernetes/cmd/}"
fi

if ! have_all "$ETCD_BIN" etcd; then
  download "$TOOLS/etcd"
  build "$TOOLS/etcd" "$ETCD_BIN" "" .
fi

if ! have_all "$HELM_BIN" helm; then
  download "$TOOLS/helm"
  build "$TOOLS/helm" "$HELM_BIN" "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" helm.sh/helm/v4/cmd/helm
fi

if ! have_all "$NODE_BIN" deviceplugin toolbox; then
  download "$TOOLS/node"
  build "$TOOLS/node" "$NODE_BIN" "" ./deviceplugin ./toolbox
fi

if ! have_all "$COREDNS_BIN" coredns; then
  download "$TOOLS/coredns"
  build "$TOOLS/coredns" "$COREDNS_BIN" "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" .
fi

if ! have_all "$KUEUE_BIN" kueue || [[ ! -f $KUEUE_CHART/Chart.yaml ]]; then
  download "$TOOLS/kueue"
  # The chart travels with the binary: both come from the one module version go.mod pins.
  src=$(cd "$TOOLS/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
  [[ -f $src/charts/kueue/Chart.yaml ]] || die "sigs.k8s.io/kueue@$KUEUE_VERSION has no charts/kueue in $src"
  # The variables Kueue's own Makefile sets, so the controller logs its real version.
  build "$TOOLS/kueue" "$KUEUE_BIN" "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION \
-X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01T00:00:00Z" sigs.k8s.io/kueue/cmd/kueue
  stage=$(mktemp -d "$CACHE/.stage.XXXXXX")
  cp -r "$src/charts/kueue" "$stage/kueue"
  chmod -R u+w "$stage"
  rm -rf "$KUEUE_DIR/chart"
  mv "$stage" "$KUEUE_DIR/chart"
fi

if ! have_crds; then
  # One module's files, not its dependencies: download exactly the pinned module (go.sum holds its hash).
  if ! (cd "$TOOLS/prometheus-operator" && go mod download "$PROMOP_MODULE" 2>"$CACHE/.download.err"); then
    cat "$CACHE/.download.err" >&2
    die "cannot download $PROMOP_MODULE@$PROMOP_VERSION from the Go module proxy ($(go env GOPROXY)); is it reachable?"
  fi
  src=$(cd "$TOOLS/prometheus-operator" && go list -m -f '{{.Dir}}' "$PROMOP_MODULE")/example/prometheus-operator-crd
  stage=$(mktemp -d "$CACHE/.stage.XXXXXX")
  for f in "${PROMOP_FILES[@]}"; do
    [[ -f $src/$f ]] || die "$PROMOP_MODULE@$PROMOP_VERSION has no $f in $src"
    cp "$src/$f" "$stage/"
  done
  chmod 755 "$stage"; chmod 644 "$stage"/*
  mkdir -p "$(dirname "$PROMOP_CRDS")"
  rm -rf "$PROMOP_CRDS"
  mv "$stage" "$PROMOP_CRDS"
fi

echo "cluster binaries ready in $((SECONDS - start))s under $CACHE" >&2
print_dirs
