# Chart and image checks (charts/tabjob/README.md). Included by the top Makefile: -include charts/tabjob/chart.mk
CHART_DIR := charts/tabjob

.PHONY: chart-tools chart-lint chart-test hadolint chart-manifest

# checkov lives in its own cached virtualenv (~/.cache/tabjob/tools): its pins clash with the project's.
chart-tools: install
	$(BIN)/python -m hack.chart_tools

hadolint: install
	$(BIN)/hadolint Dockerfile

chart-lint: install
	$(BIN)/python -m pytest -q tests/chart/test_chart_lint.py

# Everything about the chart, the Dockerfile and GitOps, the local control plane included (it starts if needed).
chart-test: chart-tools
	$(BIN)/python -m pytest -q tests/chart tests/unit/test_dockerfile.py tests/unit/test_argocd_health.py

# docs/install.yaml: the chart rendered with default values, for `kubectl apply` without Helm.
# tests/chart/test_install_manifest.py fails when it is stale.
chart-manifest: install
	$(BIN)/python -m hack.install_manifest > docs/install.yaml
