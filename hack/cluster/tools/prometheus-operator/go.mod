// Data module: pins the prometheus-operator release whose CRDs (PodMonitor, ServiceMonitor; its
// example/prometheus-operator-crd directory) hack/cluster/build.sh copies beside the other cached tools, so the serving
// e2e can create the PodMonitor `tabjob export --format kserve --pod-monitor` writes. Nothing here is built.
module tabjob.dev/hack/cluster/tools/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
