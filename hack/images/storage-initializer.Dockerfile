# KServe's storage initializer for the test bed: its own `kserve-storage` package (what KServe's
# kserve/storage-initializer image runs), on the project's Debian base, since no registry is reachable here. KServe
# runs it as the init container of a predictor pod: `initializer-entrypoint SRC_URI DEST_PATH` downloads the model
# (s3://, gs://, https://, ...) with the credentials KServe hands it in AWS_* variables, into /mnt/models.
# The serving e2e runs it the same way (tests/e2e/test_storage_e2e.py); hack/images/build.sh builds it.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    HOME=/tmp
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir kserve-storage==0.21.0 \
    && mkdir -p /storage-initializer/scripts \
    && printf '%s\n' '#!/opt/venv/bin/python' 'import sys' 'from kserve_storage import Storage' \
        'if len(sys.argv) != 3:' '    sys.exit("usage: initializer-entrypoint SRC_URI DEST_PATH")' \
        'Storage.download(sys.argv[1], sys.argv[2])' > /storage-initializer/scripts/initializer-entrypoint \
    && chmod 0755 /storage-initializer/scripts/initializer-entrypoint \
    && python -c "from kserve_storage import Storage"
USER 1000:1000
ENTRYPOINT ["/storage-initializer/scripts/initializer-entrypoint"]
