"""Where a URI's bytes live: a pyarrow FileSystem and the path inside it, for local paths, s3:// and gs://.

Every reader and writer of data and runs goes through `filesystem(uri)`, so credentials, custom endpoints and retries
are decided in one place, and always the way the cloud's own SDKs decide them:

- s3://: the standard AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, a web identity token
  from IRSA or EKS Pod Identity, ~/.aws, the instance metadata); a custom endpoint (Ceph, R2, SeaweedFS, MinIO) from
  AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, path-style; the region from AWS_REGION or AWS_DEFAULT_REGION.
- gs://: Google's application default credentials (GKE Workload Identity's metadata server, or
  GOOGLE_APPLICATION_CREDENTIALS).

A store that fails is retried a bounded number of times with backoff (TABJOB_STORAGE_RETRIES, default 5 attempts),
then the failure is a `StorageError` that names the URI and the identity used, never a traceback.
"""

from __future__ import annotations

import os
from datetime import timedelta
from urllib.parse import urlparse

import pyarrow.fs as pafs

from tabjob_trainer.errors import DataError

OBJECT_SCHEMES = ("s3", "gs")
RETRIES_ENV = "TABJOB_STORAGE_RETRIES"
DEFAULT_ATTEMPTS = 5


class StorageError(DataError):
    """The store could not be reached or refused us: not the data's fault, and not fixed by reading it again now.

    `reason` is what the job's status says: DataUnavailable (missing, refused or unreachable input data),
    OutputUnavailable (the run's output location)."""

    def __init__(self, message: str, reason: str = "DataUnavailable") -> None:
        super().__init__(message)
        self.reason = reason


def is_object_uri(uri: str) -> bool:
    return scheme_of(uri) in OBJECT_SCHEMES


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def local_path(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def attempts() -> int:
    try:
        return max(1, int(os.environ.get(RETRIES_ENV, DEFAULT_ATTEMPTS)))
    except ValueError:
        return DEFAULT_ATTEMPTS


def s3_endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(the filesystem, the path within it); a bucket's path is `bucket/key`, without the scheme."""
    scheme = scheme_of(uri)
    if scheme in ("", "file"):
        return pafs.LocalFileSystem(), local_path(uri)
    parsed = urlparse(uri)
    path = f"{parsed.netloc}{parsed.path}".rstrip("/") if parsed.path != "/" else parsed.netloc
    if scheme == "s3":
        return _s3(), path
    if scheme == "gs":
        return pafs.GcsFileSystem(retry_time_limit=_retry_window()), path
    raise DataError(f"{uri}: unknown scheme {scheme}://; use a local path, file://, s3:// or gs://")


def _retry_window() -> timedelta:
    return timedelta(seconds=15 * attempts())


def _s3() -> pafs.S3FileSystem:
    endpoint = s3_endpoint()
    options: dict[str, object] = {
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=attempts()),
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        "connect_timeout": 5.0,
    }
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parsed.netloc
        options["scheme"] = parsed.scheme or "https"
    return pafs.S3FileSystem(**options)


def identity() -> str:
    """Who the store sees us as, in words for an error message: never a secret, at most an access key's id."""
    if os.environ.get("AWS_ROLE_ARN") and os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return f"web identity role {os.environ['AWS_ROLE_ARN']} (IRSA)"
    if os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return "EKS Pod Identity"
    key = os.environ.get("AWS_ACCESS_KEY_ID")
    if key:
        return f"access key {key[:4]}...{key[-4:]} (AWS_ACCESS_KEY_ID)" if len(key) > 8 else "AWS_ACCESS_KEY_ID"
    if os.environ.get("AWS_PROFILE"):
        return f"profile {os.environ['AWS_PROFILE']}"
    return "no credentials in the environment (the instance's or node's own, if any)"
