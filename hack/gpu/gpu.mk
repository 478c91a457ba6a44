# The GPU check (README.md, "GPU check"). Included by the top Makefile: -include hack/gpu/gpu.mk
#
# `make gpu-wheels` (here, with PyPI) fills GPU_WHEELS with what a GPU box that already has PyTorch, CUDA's
# nvcc, CMake and ninja lacks; `make gpu-check` (there, offline) installs from it, compiles LightGBM with CUDA,
# runs the GPU tests and benchmarks, and writes the results to TABJOB_GPU_RESULTS (default: $OUT, else
# gpu-results/).
GPU_WHEELS ?= .gpu-wheels
# The Pythons the binary wheels (pydantic-core, PyYAML, charset-normalizer) are fetched for: a box uses its own.
GPU_PYTHONS ?= 3.10 3.11 3.12 3.13
GPU_PYTHON ?= python3
# Empty: tests and benchmarks. `GPU_CHECK=tests` or `GPU_CHECK=bench` runs one part (a time-limited session).
GPU_CHECK ?=

.PHONY: gpu-wheels gpu-check

gpu-wheels: install
	GPU_WHEELS=$(GPU_WHEELS) GPU_PYTHONS="$(GPU_PYTHONS)" PIP="$(BIN)/python -m pip" hack/gpu/wheels.sh

# Deliberately no dependency on `install`: the GPU box runs this with its own Python, offline.
gpu-check:
	GPU_WHEELS=$(GPU_WHEELS) GPU_PYTHON=$(GPU_PYTHON) hack/gpu/check.sh $(GPU_CHECK)
