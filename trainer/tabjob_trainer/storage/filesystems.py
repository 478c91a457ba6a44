"""Where a URI's bytes live: a pyarrow FileSystem and the path inside it, for local paths, s3://, gs:// and fsspec.

Every reader and writer of data and runs goes through `filesystem(uri)`, so credentials, custom endpoints, timeouts
and retries are decided in one place, and always the way the cloud's own SDKs decide them:

- s3://: the standard AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, a web identity token
  from IRSA or EKS Pod Identity, ~/.aws, the instance metadata); a custom endpoint (Ceph, R2, SeaweedFS, MinIO) from
  AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, path-style; the region from AWS_REGION or AWS_DEFAULT_REGION.
- gs://: Google's application default credentials (GKE Workload Identity's metadata server, or
  GOOGLE_APPLICATION_CREDENTIALS).
- any other scheme fsspec knows (memory://, abfs://, ...), through fsspec, as before there was this module.

**Which S3 reader.** pyarrow's own S3FileSystem (the AWS C++ SDK), not s3fs. bench/s3_read.py reads the same ~1 GB
Parquet dataset from local disk and from a SeaweedFS server both ways in one run (BENCHMARKS.md, "Object storage"):
through tabjob's reader the native one gave 1.29x s3fs's throughput for 0.73x its CPU. It also fails the way a job
needs, which was measured with a proxy in front of SeaweedFS (tests/trainer/test_datasets_faults.py holds the
native reader to it):

- wrong or missing keys (403): one request, no retry (the SDK's standard strategy never retries a 403);
- 503 / SlowDown, a refused connection: TABJOB_STORAGE_RETRIES attempts (default 5) with the SDK's exponential
  backoff, 3 to 9 s in all, then the failure;
- a store that accepts the connection and never answers: each attempt gives up after TABJOB_STORAGE_TIMEOUT seconds
  (default 10) without a byte (`request_timeout` is curl's low-speed limit on Linux: a slow but moving transfer goes
  on), then the next attempt; 5 attempts, about a minute, then the failure.

s3fs (aiobotocore) defaults to a 15 s read timeout retried by botocore *and* by s3fs itself: against the silent store
it was still waiting after 150 s and 10 requests; it can be bounded only through three separate settings.

A failure is a `StorageError` (reason DataUnavailable) whose message names the URI, the identity the store saw
(never a secret), the endpoint when it is a custom one, and how many attempts were made when it was retried.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from urllib.parse import urlparse

import pyarrow.fs as pafs

from tabjob.contracts import pod
from tabjob_trainer.errors import DataError

OBJECT_SCHEMES = ("s3", "gs")
RETRIES_ENV = pod.STORAGE_RETRIES.name  # attempts in all, the first included
TIMEOUT_ENV = pod.STORAGE_TIMEOUT.name
DEFAULT_ATTEMPTS = 5
DEFAULT_TIMEOUT = 10.0


class StorageError(DataError):
    """The store could not be reached or refused us: not the data's fault, and not fixed by reading it again now.

    `reason` is what the job's status says: DataUnavailable (missing, refused or unreachable input data),
    OutputUnavailable (the run's output location)."""

    def __init__(self, message: str, reason: str = "DataUnavailable") -> None:
        super().__init__(message)
        self.reason = reason


class UnknownScheme(DataError):
    """The URI's scheme names no filesystem this process knows; `scheme` is it, without ://."""

    def __init__(self, uri: str, scheme: str, alternatives: str = "") -> None:
        super().__init__(
            f"{uri}: unknown scheme {scheme}://; use a local path, file://, s3://, gs://, another fsspec scheme"
            + (f" or {alternatives}" if alternatives else "")
        )
        self.uri, self.scheme = uri, scheme


def is_object_uri(uri: str) -> bool:
    return scheme_of(uri) in OBJECT_SCHEMES


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def is_local(uri: str) -> bool:
    return scheme_of(uri) in ("", "file")


def local_path(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def _env_number(names: tuple[str, ...], default: float) -> float:
    for name in names:
        if os.environ.get(name):
            try:
                return float(os.environ[name])
            except ValueError:
                return default
    return default


def attempts() -> int:
    """How many times one request is tried before its failure counts (the first try included)."""
    return max(1, int(_env_number((RETRIES_ENV,), DEFAULT_ATTEMPTS)))


def timeout() -> float:
    """Seconds a request may go without receiving a byte before that attempt is abandoned."""
    return max(1.0, _env_number((TIMEOUT_ENV,), DEFAULT_TIMEOUT))


def s3_endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(the filesystem, the path within it); a bucket's path is `bucket/key`, without the scheme."""
    scheme = scheme_of(uri)
    if scheme in ("", "file"):
        return pafs.LocalFileSystem(), local_path(uri)
    parsed = urlparse(uri)
    if scheme in OBJECT_SCHEMES:
        path = f"{parsed.netloc}{parsed.path}".rstrip("/") if parsed.path != "/" else parsed.netloc
        if scheme == "s3":
            return _s3(), path
        return pafs.GcsFileSystem(retry_time_limit=_retry_window()), path
    return _fsspec(uri, scheme)


def _fsspec(uri: str, scheme: str) -> tuple[pafs.FileSystem, str]:
    import fsspec

    try:
        fs = fsspec.filesystem(scheme)
    except ImportError as exc:
        # fsspec knows the scheme but its filesystem package is not installed here.
        raise DataError(
            f"{uri}: no filesystem for {scheme}:// is installed in this image ({exc}); s3:// and gs:// come "
            "with tabjob[trainer] (s3fs, gcsfs)"
        ) from None
    except ValueError as exc:
        if "Protocol not known" not in str(exc):
            raise
        raise UnknownScheme(uri, scheme) from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), str(fs._strip_protocol(uri))


def _retry_window() -> timedelta:
    return timedelta(seconds=timeout() * attempts())


# Since 2025 the AWS SDKs compute a CRC of every response body by default, to compare with a checksum the store may
# send ("when_supported"). Ranged GETs, which is every read of a Parquet file, never carry one, and S3-compatible
# stores (SeaweedFS, older Ceph) send none at all, so the CRC is computed and thrown away: 0.3 core-seconds a GB in
# bench/s3_read.py's Parquet reads, up to 0.9 reading whole objects. Set only when the user has not chosen; the SDK
# reads it as each client is made.
CHECKSUM_ENV = "AWS_RESPONSE_CHECKSUM_VALIDATION"


def _s3() -> pafs.S3FileSystem:
    os.environ.setdefault(CHECKSUM_ENV, "when_required")
    endpoint = s3_endpoint()
    options: dict[str, object] = {
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=attempts()),
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        "connect_timeout": 5.0,
        "request_timeout": timeout(),
    }
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parsed.netloc
        options["scheme"] = parsed.scheme or "https"
    return pafs.S3FileSystem(**options)


def identity(scheme: str = "s3") -> str:
    """Who the store sees us as, in words for an error message: never a secret, at most an access key's id."""
    if scheme == "gs":
        key_file = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        return f"credentials file {key_file}" if key_file else "application default credentials (metadata server)"
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


# ------------------------------------------------------------------------------------------- store failures

# What the AWS SDK (through pyarrow) and Google's client say, sorted by what the user must do about it.
_DENIED = re.compile(
    r"ACCESS_DENIED|INVALID_ACCESS_KEY_ID|SIGNATURE_DOES_NOT_MATCH|EXPIRED_TOKEN|INVALID_CLIENT_TOKEN_ID|"
    r"MISSING_AUTHENTICATION_TOKEN|UNRECOGNIZED_CLIENT|REQUEST_EXPIRED|HTTP status 40[13]\b|PERMISSION_DENIED|"
    r"UNAUTHENTICATED|AccessDenied|Forbidden"
)
_NO_BUCKET = re.compile(r"NO_SUCH_BUCKET|NoSuchBucket|bucket does not exist", re.IGNORECASE)
_MISSING = re.compile(r"NO_SUCH_KEY|RESOURCE_NOT_FOUND|HTTP status 404\b|NOT_FOUND|NoSuchKey")
_TIMED_OUT = re.compile(r"curlCode: 28|Timeout was reached|REQUEST_TIMEOUT|DEADLINE_EXCEEDED|timed out", re.IGNORECASE)
_UNREACHABLE = re.compile(r"NETWORK_CONNECTION|curlCode: (6|7)\b|Could not (connect|resolve)|UNAVAILABLE: Connection")
_BUSY = re.compile(
    r"HTTP status 5\d\d|SLOW_DOWN|SLOWDOWN|SERVICE_UNAVAILABLE|THROTTLING|INTERNAL_FAILURE|UNAVAILABLE|"
    r"RESOURCE_EXHAUSTED|HTTP status 429\b"
)
# pyarrow's wording around the SDK's: "When reading information for key 'k' in bucket 'b': AWS Error X during Y
# operation: message". The key and bucket are in the URI the message names already.
_PREFIX = re.compile(r"^When [^:]*: ")
_AWS = re.compile(r"AWS Error (?:UNKNOWN \(HTTP status (\d+)\)|(\w+)) during (\w+) operation: ?")


def store_failure(exc: BaseException) -> bool:
    """Whether `exc` is the store failing (refused, missing, unreachable, busy) rather than the bytes being bad."""
    if isinstance(exc, FileNotFoundError | PermissionError):
        return True
    if not isinstance(exc, OSError):
        return False
    text = str(exc)
    return any(p.search(text) for p in (_DENIED, _NO_BUCKET, _MISSING, _TIMED_OUT, _UNREACHABLE, _BUSY)) or (
        "AWS Error" in text or "google::cloud" in text
    )


def refused(exc: BaseException) -> bool:
    """Whether the store said no for good (access denied, no such bucket): asking again, now or in a new attempt,
    gets the same answer; unlike a store that is down, busy or slow."""
    text = " ".join(str(exc).split())
    return isinstance(exc, PermissionError) or bool(_DENIED.search(text) or _NO_BUCKET.search(text))


def storage_error(uri: str, exc: BaseException) -> StorageError:
    """`exc` from the store, as one line: what happened to `uri`, as whom, and whether retrying was tried."""
    text = " ".join(str(exc).split())
    scheme = scheme_of(uri)
    detail = _detail(text)
    if isinstance(exc, PermissionError) or _DENIED.search(text):
        if scheme not in OBJECT_SCHEMES:
            return StorageError(f"{uri}: permission denied ({detail})")
        return StorageError(
            f"{uri}: access denied ({detail}){_seen(uri)}; check the credentials and what they may read"
        )
    if _NO_BUCKET.search(text):
        return not_found(uri, bucket_missing=True)
    if isinstance(exc, FileNotFoundError) or _MISSING.search(text):
        return not_found(uri)
    tried = _tried(scheme)
    if _TIMED_OUT.search(text):
        return StorageError(f"{uri}: the store did not answer within {timeout():g} s, {tried} ({detail}){_seen(uri)}")
    if _UNREACHABLE.search(text):
        return StorageError(f"{uri}: cannot reach the store, {tried} ({detail}){_seen(uri)}")
    if _BUSY.search(text):
        return StorageError(f"{uri}: the store is unavailable or throttling, {tried} ({detail}){_seen(uri)}")
    return StorageError(f"{uri}: the store failed ({detail}){_seen(uri)}")


def not_found(uri: str, bucket_missing: bool = False) -> StorageError:
    """Nothing at `uri`: the file (local), the object or prefix, or (bucket_missing) the bucket itself."""
    if is_local(uri):
        return StorageError(f"{uri}: file not found")
    if bucket_missing:
        return StorageError(f"{uri}: bucket {urlparse(uri).netloc} does not exist{_seen(uri)}")
    if scheme_of(uri) in OBJECT_SCHEMES:
        return StorageError(f"{uri}: not found: no object or prefix of that name{_seen(uri)}")
    return StorageError(f"{uri}: not found")


def _seen(uri: str) -> str:
    """Who asked, and where, for a message about an object store: what to check when it says no."""
    scheme = scheme_of(uri)
    if scheme not in OBJECT_SCHEMES:
        return ""
    endpoint = s3_endpoint() if scheme == "s3" else None
    return f"; identity: {identity(scheme)}" + (f"; endpoint: {endpoint}" if endpoint else "")


def _tried(scheme: str) -> str:
    if scheme == "gs":
        return f"retried with backoff for {_retry_window().total_seconds():g} s"
    n = attempts()
    return f"tried {n} time{'s' if n != 1 else ''} with backoff" if n > 1 else "tried once (retries are off)"


def _detail(text: str) -> str:
    text = _PREFIX.sub("", text)
    match = _AWS.search(text)
    if match:
        status, code, operation = match.groups()
        rest = text[match.end() :].split(" (Request ID", 1)[0].strip().rstrip(".")
        if rest in ("No response body", ""):
            rest = ""
        label = f"HTTP {status}" if status else code
        text = f"{operation}: {label}" + (f", {rest}" if rest else "")
    return text if len(text) <= 240 else text[:237] + "..."
