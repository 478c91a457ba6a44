"""Real MLServer processes on loopback for the serving tests, and the V2 JSON clients that talk to them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HOST = "127.0.0.1"
START_TIMEOUT = 180.0  # MLServer imports a lot; on two shared, loaded cores this has taken over a minute


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Server:
    process: subprocess.Popen[str]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/v2/health/ready", timeout=5) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited ({self.process.returncode}): {self.log.read_text()[-3000:]}")
            if self.ready():
                return
            time.sleep(0.5)
        raise AssertionError(f"not ready after {START_TIMEOUT} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)


@contextmanager
def running(args: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    with log.open("w") as out:
        process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})}
        )
    server = Server(process, port, log)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def tabjob_serve(run: Path, log: Path, *extra: str) -> tuple[list[str], int]:
    """The command line of `tabjob serve` on three free loopback ports, and its HTTP port."""
    http, grpc, metrics = free_ports(3)
    code = "import sys; from tabjob.cli import main; sys.exit(main(sys.argv[1:]))"
    args = [sys.executable, "-c", code, "serve", str(run), "--host", HOST, "--port", str(http)]
    return [*args, "--grpc-port", str(grpc), "--metrics-port", str(metrics), *extra], http


def post(url: str, body: bytes | dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a JSON body (or raw bytes); the status and the decoded answer, errors included."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def v2_body(frame: pd.DataFrame, datatypes: dict[str, str]) -> dict[str, Any]:
    """A V2 JSON request with one input per column; a missing cell is JSON null."""
    inputs = []
    for col, datatype in datatypes.items():
        values = [None if pd.isna(v) else (v.item() if isinstance(v, np.generic) else v) for v in frame[col]]
        inputs.append({"name": col, "datatype": datatype, "shape": [len(frame), 1], "data": values})
    return {"inputs": inputs}


def outputs_frame(answer: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame({o["name"]: o["data"] for o in answer["outputs"]})
