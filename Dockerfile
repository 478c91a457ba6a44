# syntax=docker/dockerfile:1.7
# Two images from one file:
#   docker build --target operator -t ghcr.io/tabjob/tabjob-operator:0.1.0 .   # kopf operator, no torch (slim)
#   docker build --target trainer  -t ghcr.io/tabjob/tabjob-trainer:0.1.0 .    # CUDA, PyTorch, LightGBM with CUDA
# Every version is pinned here (base images by release tag, Python packages by ==). tests/unit/test_dockerfile.py
# keeps TABJOB_VERSION equal to the package version and checks that the commands named here exist.

ARG TABJOB_VERSION=0.1.0
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG CUDA_VERSION=12.8.1
ARG UBUNTU=ubuntu24.04

# ---------------------------------------------------------------------------------------------------------------
# The tabjob wheel (both import packages, tabjob and tabjob_trainer); built once, installed by both targets.
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
COPY trainer/ trainer/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---------------------------------------------------------------------------------------------------------------
# The operator: `tabjob operator` (kopf). The control side never imports torch or lightgbm, so neither is here.
FROM ${PYTHON_IMAGE} AS operator
ARG TABJOB_VERSION
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir \
        "/wheels/tabjob-${TABJOB_VERSION}-py3-none-any.whl[operator]" \
        kopf==1.45.2 kubernetes==37.0.2 prometheus-client==0.26.0 \
        pydantic==2.14.3 PyYAML==6.0.3 rich==15.0.0 \
    && rm -rf /wheels \
    # Fail the build if the slim image ever pulls in the trainer's heavy dependencies.
    && python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('torch', 'lightgbm')))" \
    && tabjob --version
# 65532 is the conventional "nonroot" id; the chart's podSecurityContext uses the same.
USER 65532:65532
ENTRYPOINT ["tabjob"]
CMD ["operator", "--all-namespaces"]

# ---------------------------------------------------------------------------------------------------------------
# LightGBM built from source with its CUDA tree learner (device_type=cuda); the PyPI wheel is CPU/OpenCL only.
FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS lightgbm-cuda
# apt versions are not pinned: the base image's release tag pins the distribution, and Ubuntu's archive drops old
# package versions, which would break a pinned build. So DL3008 (pin apt versions) is ignored, here and below.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip install --no-cache-dir cmake==3.31.6 ninja==1.11.1.4 \
    && PATH=/opt/build/bin:$PATH /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-binary lightgbm \
        --config-settings=cmake.define.USE_CUDA=ON --wheel-dir /wheels lightgbm==4.7.0

# ---------------------------------------------------------------------------------------------------------------
# The trainer: what the operator's pods run (`torchrun ... -m tabjob_trainer`), also usable as `tabjob run`.
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU} AS trainer
ARG TABJOB_VERSION
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    # The pods run with a read-only image and a writable /tmp; matplotlib and torch keep their caches there.
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
# libgomp1: OpenMP for LightGBM and PyTorch's CPU kernels. DL3008 ignored: see the lightgbm-cuda stage.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv libgomp1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=wheel /wheels /wheels
COPY --from=lightgbm-cuda /wheels /wheels
# PyPI's Linux torch wheels are the CUDA 12 builds; the CUDA libraries come with them as nvidia-* wheels. The local
# LightGBM wheel is named explicitly, so pip takes it instead of the CPU wheel from PyPI.
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir \
        /wheels/lightgbm-4.7.0-*.whl \
        "/wheels/tabjob-${TABJOB_VERSION}-py3-none-any.whl[trainer]" \
        torch==2.15.0 numpy==2.4.6 pandas==3.1.1 pyarrow==26.0.1 fsspec==2026.9.0 \
        scikit-learn==1.9.1 matplotlib==3.11.2 prometheus-client==0.26.0 \
        pydantic==2.14.3 PyYAML==6.0.3 rich==15.0.0 \
    && rm -rf /wheels \
    && python -c "import tabjob_trainer, torch, lightgbm" \
    && command -v torchrun
# 1000 is the trainer's default runAsUser (the operator's TABJOB_RUN_AS_USER); the base image's `ubuntu` user.
USER 1000:1000
ENTRYPOINT ["torchrun"]
CMD ["--nproc-per-node=1", "-m", "tabjob_trainer"]
