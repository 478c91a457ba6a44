# Local Kubernetes control plane for the e2e tests (hack/cluster/README.md). Included by the top Makefile.
CLUSTER_PY := $(BIN)/python -m hack.cluster.controlplane

.PHONY: cluster cluster-down cluster-binaries cluster-status

# Builds the binaries once (cached under ~/.cache/tabjob/cluster), then starts everything in the background.
cluster: install
	$(CLUSTER_PY) up

cluster-down:
	@if [ -x $(BIN)/python ]; then $(CLUSTER_PY) down; else rm -rf .cluster; fi

cluster-binaries:
	hack/cluster/build.sh

cluster-status:
	$(CLUSTER_PY) status
