# The whole set-up is two commands: `make quickstart` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# tests/unit's own virtualenv: the control side and the tools its tests run, none of the trainer's libraries.
UNIT_VENV := .venv-unit
UNIT_BIN := $(UNIT_VENV)/bin
CRD := crds/tabjob.dev_tabularjobs.yaml
CHART_CRD := charts/tabjob/crds/tabjob.dev_tabularjobs.yaml
TP_CRD := crds/tabjob.dev_tabularpredictions.yaml
CHART_TP_CRD := charts/tabjob/crds/tabjob.dev_tabularpredictions.yaml

.PHONY: install unit-install quickstart test test-unit lint typecheck pytest chaos crds crds-check clean help

help:
	@echo "make quickstart   install, then run examples/quickstart.yaml on this machine"
	@echo "make test         install, lint, type-check and run every test"
	@echo "make test-unit    lint, type-check and the unit tests in a small virtualenv of their own: no torch, no Go,"
	@echo "                  no cluster; about three minutes cold, two warm"
	@echo "make crds         regenerate crds/ and the chart's copy from the pydantic models"
	@echo "make cluster      start the local control plane (tests/cluster); make cluster-down stops it"
	@echo "make chaos        faults on the local cluster (RELIABILITY.md): minutes per scenario, bounded"
	@echo "make gpu-wheels   fetch what a GPU box lacks into .gpu-wheels; make gpu-check runs the GPU tests there"

# The stamp is refreshed whenever pyproject.toml changes, so `make install` is cheap when warm.
$(BIN)/tabjob: pyproject.toml
	@test -x $(BIN)/python || hack/need_disk.sh 11.4 . "a new virtualenv (.venv): 11.4 GiB at its peak, the downloaded wheels beside the installed tree"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[operator,trainer,serve,dev]'
	@touch $@

install: $(BIN)/tabjob

# pyproject's `unit` extra (pytest, hypothesis, ruff, mypy, hadolint, lupa) and the operator's: about 60 MB of
# wheels, where .venv holds the trainer's torch, LightGBM, CatBoost, XGBoost and MLServer (about 7 GiB).
$(UNIT_BIN)/tabjob: pyproject.toml
	@test -x $(UNIT_BIN)/python || hack/need_disk.sh 1 . "the unit tests' virtualenv (.venv-unit)"
	@test -x $(UNIT_BIN)/python || $(PYTHON) -m venv $(UNIT_VENV)
	$(UNIT_BIN)/python -m pip install -q --upgrade pip
	$(UNIT_BIN)/python -m pip install -q -e '.[operator,unit]'
	@touch $@

unit-install: $(UNIT_BIN)/tabjob

quickstart: install
	$(BIN)/tabjob validate examples/quickstart.yaml
	$(BIN)/tabjob plan examples/quickstart.yaml
	@# A fresh run each time: a run stored by an older tabjob (other defaults, so another plan) cannot be resumed.
	rm -rf runs/quickstart
	$(BIN)/tabjob run examples/quickstart.yaml --output-dir runs/quickstart
	@echo "next: .venv/bin/tabjob predict runs/quickstart sklearn://breast_cancer --output runs/quickstart/predictions.csv; .venv/bin/tabjob report runs/quickstart"

lint: install
	$(BIN)/ruff check operator trainer tests bench hack
	$(BIN)/ruff format --check operator trainer tests bench hack

typecheck: install
	$(BIN)/mypy

# pytest exits 5 when it collected nothing: say so plainly and fail, since an empty suite proves nothing.
# Two workers: the cluster's tests (mostly waiting on pods) run on one while the trainer's and the unit tests (CPU)
# run on the other (tests/conftest.py groups them); PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
pytest: install cluster-binaries
	@rc=0; $(BIN)/python -m pytest --durations=15 --numprocesses=$(PYTEST_WORKERS) $(PYTEST_ARGS) \
		|| rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5): check PYTEST_ARGS and tests/"; fi; \
	exit $$rc

# What pytest needs is built side by side: the Go binaries (CPU) beside the images and the virtualenv (mostly
# downloads; neither needs the other), then the lint and type checks once the virtualenv is there. A cold machine
# waits for the longest of these, not their sum; after a code change the image rebuild overlaps the virtualenv of a
# fresh clone. Each is cached, so with nothing changed this is seconds.
# The parallel stage's own checks each see the same free space, so together they could pass and still fill the disk
# (the virtualenv peaks at 11.4 GiB, the trainer image's build at 7.4): hack/build_order.sh checks the sum once, and
# where the disk holds each peak but not both it builds the virtualenv first.
test:
	@order=$$(hack/build_order.sh) || exit 1; \
	if [ "$$order" = venv-first ]; then \
		echo "make test: not room for the virtualenv and the images side by side; the virtualenv first"; \
		$(MAKE) --no-print-directory install || exit 1; \
	fi
	$(MAKE) --no-print-directory -j3 --output-sync=line lint typecheck crds-check cluster-binaries images
	$(MAKE) --no-print-directory pytest

# The quick loop, in .venv-unit: what needs neither the trainer's libraries, nor Go, nor a cluster (tests/unit; the
# trainer's fits and the chart's helm runs are in `make test`). Without numpy and torch installed mypy sees their
# types as Any, so the `type: ignore`s they need look unused: `make test`'s typecheck holds those.
test-unit: $(UNIT_BIN)/tabjob
	$(UNIT_BIN)/ruff check operator trainer tests bench hack
	$(UNIT_BIN)/ruff format --check operator trainer tests bench hack
	$(UNIT_BIN)/mypy --no-warn-unused-ignores
	$(UNIT_BIN)/python -m tabjob.api.crdgen --check $(CRD) $(CHART_CRD)
	$(UNIT_BIN)/python -m pytest -q -m 'not e2e' tests/unit

# Each scenario is bounded and stops by itself; the figures go to bench/results/chaos.log (RELIABILITY.md).
chaos: install cluster-binaries
	$(BIN)/python -m pytest -m chaos tests/chaos $(PYTEST_ARGS)

crds: install
	$(BIN)/python -m tabjob.api.crdgen --output $(CRD)
	cp $(CRD) $(CHART_CRD)
	$(BIN)/python -m tabjob.api.crdgen --kind TabularPrediction --output $(TP_CRD)
	cp $(TP_CRD) $(CHART_TP_CRD)
	$(BIN)/python -m hack.install_manifest > docs/install.yaml

crds-check: install
	$(BIN)/python -m tabjob.api.crdgen --check $(CRD) $(CHART_CRD)
	$(BIN)/python -m tabjob.api.crdgen --kind TabularPrediction --check $(TP_CRD) $(CHART_TP_CRD)

clean:
	rm -rf $(VENV) $(UNIT_VENV) runs .pytest_cache .mypy_cache .ruff_cache

-include hack/cluster/cluster.mk
-include charts/tabjob/chart.mk
-include hack/gpu/gpu.mk
-include hack/images/images.mk
