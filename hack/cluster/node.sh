#!/usr/bin/env bash
# One node of the test cluster: containerd, the fake-GPU device plugin (GPU nodes) and the kubelet, started by
# hack/cluster/nodes.py inside the cluster's network namespace and a mount namespace of the node's own
# (nsenter --net=... unshare --mount --propagation private), so that the paths kubelet and containerd 1.6
# hard-code are this node's alone and every mount made here disappears with the node's last process.
#
#   node.sh NODE_DIR RUN_DIR LOG_PREFIX        (environment: K8S_BIN, NODE_BIN, KUBELET_ARGS, PLUGIN_ARGS)
#
# The kubelet runs in a loop so a test can stop it (touch NODE_DIR/kubelet.stopped, kill NODE_DIR/kubelet.pid)
# and start it again (remove the file) without touching containerd or the pods: a node whose kubelet is lost.
set -euo pipefail
dir=$1 run=$2 log=$3

mount --bind "$dir/device-plugins" /var/lib/kubelet/device-plugins
mount --bind "$dir/log-containers" /var/log/containers
mount --bind "$run" /run/containerd

containerd --config "$dir/containerd.toml" >>"$log.containerd.log" 2>&1 &
echo $! >"$dir/containerd.pid"
for _ in $(seq 200); do
  [[ -S $run/containerd.sock ]] && break
  sleep 0.05
done

if [[ -n ${PLUGIN_ARGS-} ]]; then
  # shellcheck disable=SC2086 # word splitting is wanted: PLUGIN_ARGS is a list of flags without spaces
  "$NODE_BIN/deviceplugin" $PLUGIN_ARGS >>"$log.deviceplugin.log" 2>&1 &
  echo $! >"$dir/deviceplugin.pid"
fi

while :; do
  if [[ -e $dir/kubelet.stopped ]]; then
    sleep 0.5
    continue
  fi
  # shellcheck disable=SC2086
  "$K8S_BIN/kubelet" $KUBELET_ARGS >>"$log.kubelet.log" 2>&1 &
  echo $! >"$dir/kubelet.pid"
  wait $! || true
  sleep 0.5
done
