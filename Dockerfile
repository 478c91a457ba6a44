# syntax=docker/dockerfile:1.7
# Three images from one file:
#   docker build --target operator    -t ghcr.io/tabjob/tabjob-operator:0.1.0 .      # kopf operator, no torch
#   docker build --target trainer     -t ghcr.io/tabjob/tabjob-trainer:0.1.0 .       # CUDA: PyTorch, LightGBM+CUDA
#   docker build --target trainer-cpu -t ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu .   # CPU only, same entry point
# buildah takes the same arguments: `buildah build --network host --target operator -t ... .`.
#
# Base images are build arguments, so a machine without Docker Hub or NVIDIA's registry can bring its own:
#   PYTHON_IMAGE        operator, trainer-cpu and the wheel stage: any Debian/Ubuntu image with python3 (>= 3.11),
#                       python3-venv and pip. hack/images/build.sh (`make images`) makes one from Debian packages
#                       with mmdebstrap and passes --build-arg PYTHON_IMAGE=localhost/tabjob/python-base:bookworm.
#   CUDA_RUNTIME_IMAGE  the CUDA trainer: NVIDIA's runtime image by default (its environment asks the NVIDIA
#                       container toolkit for the driver); the CUDA libraries themselves come from torch's wheels.
#   CUDA_BUILD_IMAGE    where LightGBM's CUDA tree learner is compiled: any Debian/Ubuntu with python3. No NVIDIA
#                       image is needed: nvcc, the CUDA runtime, CCCL and NCCL come from PyPI wheels (CUDA_WHEELS),
#                       and compiling needs no GPU (`make lightgbm-cuda-wheel` proves it on a machine without one).
#   LIGHTGBM_CUDA_ARCHS the GPU architectures to compile for, as CMAKE_CUDA_ARCHITECTURES ("90-real" for H100/H200
#                       only); empty means LightGBM's own list (75 through 120 for CUDA 13), which is slower to build.
# Every version is pinned here (base images by release tag, Python packages by ==). tests/unit/test_dockerfile.py
# keeps TABJOB_VERSION equal to the package version and checks that the commands named here exist.
# Measured with buildah on a shared 2-core machine (README.md, "Images", has the details): operator 450 MB, cold
# build 3.5 min; trainer-cpu 5.17 GB, cold build 15 min (4 GB of wheels); after a code change both rebuild in
# 6.5 min from the layer cache.

ARG TABJOB_VERSION=0.1.0
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG CUDA_RUNTIME_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04
ARG CUDA_BUILD_IMAGE=python:3.11.14-slim-bookworm
ARG CUDA_WHEELS=13.2.86
ARG LIGHTGBM_VERSION=4.7.0
ARG LIGHTGBM_CUDA_ARCHS=

# ---------------------------------------------------------------------------------------------------------------
# The tabjob wheel (both import packages, tabjob and tabjob_trainer); built once, installed by every target.
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
COPY trainer/ trainer/
# A venv, because Debian's own python3 refuses `pip install` outside one (PEP 668); python:*-slim does not mind.
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---------------------------------------------------------------------------------------------------------------
# The operator: `tabjob operator` (kopf). The control side never imports torch or lightgbm, so neither is here.
FROM ${PYTHON_IMAGE} AS operator
ARG TABJOB_VERSION
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
# Third-party packages first, in a layer that does not depend on the tabjob wheel, so a change to tabjob's code
# or README rebuilds only the small layer below it.
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir \
        kopf==1.45.2 kubernetes==37.0.2 prometheus-client==0.26.0 \
        pydantic==2.14.3 PyYAML==6.0.3 rich==15.0.0
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir --no-deps "/wheels/tabjob-${TABJOB_VERSION}-py3-none-any.whl" \
    && rm -rf /wheels \
    # Fail the build if the slim image ever pulls in the trainer's heavy dependencies.
    && python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('torch', 'lightgbm')))" \
    && python -c "import kopf, kubernetes, tabjob.controller" \
    && tabjob --version
# 65532 is the conventional "nonroot" id; the chart's podSecurityContext uses the same. It must exist in
# /etc/passwd: kopf names its peer identity after getpass.getuser(), which fails for an unknown uid.
RUN useradd --system --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin nonroot
USER 65532:65532
ENTRYPOINT ["tabjob"]
CMD ["operator", "--all-namespaces"]

# ---------------------------------------------------------------------------------------------------------------
# The CPU trainer: the same entry point as `trainer`, with PyPI's LightGBM (CPU) and torch. PyPI's only Linux
# x86_64 torch wheel is the CUDA build, and it does not import without the CUDA libraries it links
# (libcublasLt, libcudnn, libnccl...: "ValueError: libcublasLt.so.*[0-9] not found"), so those stay; what a CPU
# run never loads goes in the same layer: triton (torch.compile's GPU code generator), cuSOLVER (needed only by
# the CUDA linalg library, loaded on first use), NVTX, the CUDA Python bindings and CCCL's headers. CUPTI stays:
# torch._C links it ("ImportError: libcupti.so.13" without it).
FROM ${PYTHON_IMAGE} AS trainer-cpu
ARG TABJOB_VERSION
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    # The pods run with a read-only image and a writable /tmp; matplotlib and torch keep their caches there.
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
# Third-party packages first (the slow layer: torch and its CUDA libraries), independent of the tabjob wheel.
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir \
        lightgbm==4.7.0 torch==2.15.0 numpy==2.4.6 pandas==3.1.1 pyarrow==26.0.1 fsspec==2026.9.0 \
        scikit-learn==1.9.1 matplotlib==3.11.2 prometheus-client==0.26.0 \
        pydantic==2.14.3 PyYAML==6.0.3 rich==15.0.0 \
    && pip uninstall --yes triton nvidia-cusolver nvidia-nvtx cuda-bindings cuda-pathfinder cuda-toolkit \
        nvidia-cuda-cccl
# CatBoost, XGBoost, TabM and RealMLP (pytabkit, over PyTorch Lightning) in a layer of their own, so that the torch
# layer above stays cached. xgboost-cpu is the same release as PyPI's xgboost without its CUDA library and NCCL
# (about 5 MB against 130 MB and the NCCL wheel).
RUN pip install --no-cache-dir catboost==1.2.10 xgboost-cpu==3.2.0 numpy==2.4.6 pandas==3.1.1 \
        tabm==0.0.3 rtdl_num_embeddings==0.0.12 pytabkit==1.7.3 pytorch-lightning==2.6.6 torchmetrics==1.9.0 \
    && python -c "import catboost, xgboost, tabm, pytabkit"
# s3:// and gs:// data (fsspec's S3 and GCS filesystems), MLServer for `tabjob serve` and exported models (the
# same pin as pyproject's `serve` extra; numpy and pandas named so its resolver keeps theirs), and the trainer's
# user (1000, the operator's TABJOB_RUN_AS_USER), named so that getpass.getuser() works in the pod.
RUN pip install --no-cache-dir s3fs==2026.9.0 gcsfs==2026.10.0 fsspec==2026.9.0 \
        mlserver==1.7.1 numpy==2.4.6 pandas==3.1.1 \
    && python -c "import s3fs, gcsfs, mlserver" \
    && useradd --uid 1000 --user-group --no-create-home --shell /usr/sbin/nologin tabjob
COPY --from=wheel /wheels /wheels
# --no-deps: every dependency is above, pinned; a resolver run would bring back what was removed.
RUN pip install --no-cache-dir --no-deps "/wheels/tabjob-${TABJOB_VERSION}-py3-none-any.whl" \
    && rm -rf /wheels \
    # One real CPU step of each library, so a missing shared library fails the build, not the first job.
    && python -c "import tabjob_trainer, torch, lightgbm, numpy as np; \
torch.nn.Linear(4, 1)(torch.ones(2, 4)).sum().backward(); \
lightgbm.train({'verbose': -1}, lightgbm.Dataset(np.random.rand(64, 4), np.random.rand(64)), 2)" \
    && python -c "import tabjob_trainer.serving.runtime" \
    && command -v torchrun mlserver
# 1000 is the trainer's default runAsUser (the operator's TABJOB_RUN_AS_USER).
USER 1000:1000
ENTRYPOINT ["torchrun"]
CMD ["--nproc-per-node=1", "-m", "tabjob_trainer"]

# ---------------------------------------------------------------------------------------------------------------
# LightGBM built from source with its CUDA tree learner (device_type=cuda); the PyPI wheel is CPU/OpenCL only.
# The CUDA toolkit is assembled from PyPI wheels (nvcc, its NVVM and CRT parts, the runtime, CCCL, NCCL), all at
# one CUDA release: an nvvm newer than ptxas writes PTX that ptxas rejects ("Unsupported .version").
FROM ${CUDA_BUILD_IMAGE} AS lightgbm-cuda
ARG CUDA_WHEELS
ARG LIGHTGBM_VERSION
ARG LIGHTGBM_CUDA_ARCHS
# Parallel compile jobs (nvcc takes ~2 GB per job); raise it on a big build machine.
ARG CMAKE_BUILD_PARALLEL_LEVEL=2
# apt versions are not pinned: the base image's release tag pins the distribution, and the archive drops old
# package versions, which would break a pinned build. So DL3008 (pin apt versions) is ignored, here and below.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ python3-venv \
    && rm -rf /var/lib/apt/lists/*
# The wheels' toolkit lacks the unversioned libcudart.so that CMake's FindCUDAToolkit looks for, and NCCL ships only
# libnccl.so.2: both are named to CMake. LightGBM gives NCCL's headers only to the target that links NCCL, yet
# c_api.cpp includes nccl.h too (a CUDA toolkit with NCCL installed beside it hides this), so the headers go on every
# target's include path ("fatal error: nccl.h: No such file or directory" in c_api.cpp otherwise). NCCL is linked
# shared and found at run time beside torch's copy (the nvidia-nccl-cu13 wheel, through the RPATH); the CUDA runtime
# is linked statically, as LightGBM does.
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip install --no-cache-dir cmake==3.31.6 ninja==1.11.1.4 \
        "nvidia-cuda-nvcc==${CUDA_WHEELS}" "nvidia-nvvm==${CUDA_WHEELS}" "nvidia-cuda-crt==${CUDA_WHEELS}" \
        "nvidia-cuda-runtime==${CUDA_WHEELS}" "nvidia-cuda-cccl==${CUDA_WHEELS}" nvidia-nccl-cu13==2.30.7
# LIGHTGBM_CUDA_ARCHS is one word or none: $ARCHS stays unquoted on purpose, so that "none" adds no argument.
# hadolint ignore=SC2086
RUN NV="$(/opt/build/bin/python -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))')/nvidia" \
    && ARCHS="${LIGHTGBM_CUDA_ARCHS:+--config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=${LIGHTGBM_CUDA_ARCHS}}" \
    && PATH="/opt/build/bin:$PATH" \
        /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-binary lightgbm --wheel-dir /wheels \
        --config-settings=cmake.define.USE_CUDA=ON \
        "--config-settings=cmake.define.CMAKE_CUDA_COMPILER=$NV/cu13/bin/nvcc" \
        "--config-settings=cmake.define.CUDAToolkit_ROOT=$NV/cu13" \
        "--config-settings=cmake.define.CUDA_CUDART=$NV/cu13/lib/libcudart.so.13" \
        --config-settings=cmake.define.BUILD_WITH_SHARED_NCCL=ON \
        --config-settings=cmake.define.USE_NCCL_LIB_PATH=ON \
        "--config-settings=cmake.define.NCCL_INCLUDE_DIR=$NV/nccl/include" \
        "--config-settings=cmake.define.CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES=$NV/nccl/include" \
        "--config-settings=cmake.define.CMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES=$NV/nccl/include" \
        "--config-settings=cmake.define.NCCL_LIBRARY=$NV/nccl/lib/libnccl.so.2" \
        '--config-settings=cmake.define.CMAKE_INSTALL_RPATH=$ORIGIN/../../nvidia/nccl/lib' \
        $ARCHS "lightgbm==${LIGHTGBM_VERSION}"

# ---------------------------------------------------------------------------------------------------------------
# The trainer: what the operator's pods run (`torchrun ... -m tabjob_trainer`), also usable as `tabjob run`.
FROM ${CUDA_RUNTIME_IMAGE} AS trainer
ARG TABJOB_VERSION
ARG LIGHTGBM_VERSION
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
# PyPI's Linux torch wheels are the CUDA builds; the CUDA libraries (NCCL included, which the local LightGBM
# links) come with them as nvidia-* wheels. The local LightGBM wheel is named explicitly, so pip takes it instead
# of the CPU wheel from PyPI.
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir \
        "/wheels/lightgbm-${LIGHTGBM_VERSION}-"*.whl \
        "/wheels/tabjob-${TABJOB_VERSION}-py3-none-any.whl[trainer]" \
        torch==2.15.0 catboost==1.2.10 xgboost==3.2.0 tabm==0.0.3 rtdl_num_embeddings==0.0.12 \
        pytabkit==1.7.3 pytorch-lightning==2.6.6 torchmetrics==1.9.0 numpy==2.4.6 pandas==3.1.1 pyarrow==26.0.1 fsspec==2026.9.0 \
        s3fs==2026.9.0 gcsfs==2026.10.0 mlserver==1.7.1 \
        scikit-learn==1.9.1 matplotlib==3.11.2 prometheus-client==0.26.0 \
        pydantic==2.14.3 PyYAML==6.0.3 rich==15.0.0 \
    && rm -rf /wheels \
    && python -c "import tabjob_trainer, torch, lightgbm, catboost, xgboost, tabm, pytabkit, s3fs, gcsfs, tabjob_trainer.serving.runtime" \
    && command -v torchrun mlserver
# 1000 is the trainer's default runAsUser (the operator's TABJOB_RUN_AS_USER); the base image's `ubuntu` user.
USER 1000:1000
ENTRYPOINT ["torchrun"]
CMD ["--nproc-per-node=1", "-m", "tabjob_trainer"]
