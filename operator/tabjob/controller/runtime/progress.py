"""The progress probe: rank 0's `/progress` endpoint, read with a total deadline and a bounded body.

The trainer image is the tenant's code, so this read trusts nothing about it: the whole request (connect, headers,
body) has one deadline, the body is cut off at `MAX_BODY` bytes, and at most `concurrency` probes run at once. It
uses asyncio streams rather than a thread, so a trainer that trickles one byte a second holds no worker of the API
pool (nor any thread at all) and is simply cancelled at its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pydantic import ValidationError

from tabjob.contracts.results import ProgressSnapshot

MAX_BODY = 64 * 1024  # a ProgressSnapshot is under 300 bytes
MAX_HEADERS = 16 * 1024


def normalize_progress(body: bytes | str) -> dict[str, Any] | None:
    """A ProgressSnapshot (contracts/results.py) as status.progress fields; anything else is no progress at all."""
    try:
        snap = ProgressSnapshot.model_validate_json(body, by_name=False)  # the wire spelling only
    except ValidationError:
        return None
    return snap.model_dump(
        by_alias=True, exclude_none=True, include={"fits_done", "fits_failed", "fits_total", "best_score", "best_model"}
    )


async def _get(host: str, port: int, path: str) -> bytes | None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nAccept: application/json\r\n\r\n".encode())
        await writer.drain()
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await reader.read(1024)
            if not chunk or len(head) > MAX_HEADERS:
                return None
            head += chunk
        head, _, body = head.partition(b"\r\n\r\n")
        if not head.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200")):
            return None
        while len(body) <= MAX_BODY:
            chunk = await reader.read(4096)
            if not chunk:
                return body
            body += chunk
        return None  # larger than any snapshot: not one
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


class ProgressProbe:
    def __init__(self, deadline: float = 3.0, concurrency: int = 16) -> None:
        self.deadline = deadline
        self.slots = asyncio.Semaphore(concurrency)

    async def read_body(self, host: str, port: int) -> bytes | None:
        """The endpoint's body as it is (a scoring pod's ScoringProgress), within the same deadline and bound."""
        async with self.slots:
            try:
                async with asyncio.timeout(self.deadline):
                    return await _get(host, port, "/progress")
            except (OSError, TimeoutError, ValueError):
                return None

    async def read(self, host: str, port: int) -> dict[str, Any] | None:
        """The snapshot as status.progress fields, or None (not serving yet, too slow, too big, not a snapshot)."""
        async with self.slots:
            try:
                async with asyncio.timeout(self.deadline):  # keeps a shutdown's cancel (3.11's wait_for can lose it)
                    body = await _get(host, port, "/progress")
            except (OSError, TimeoutError, ValueError):
                return None
        return None if body is None else normalize_progress(body)


def progress_address(pods: list[dict[str, Any]], rank_label: str) -> tuple[str, int] | None:
    """Rank 0's pod IP and its `progress` container port, once it has both."""
    for pod in pods:
        if (pod["metadata"].get("labels") or {}).get(rank_label) != "0":
            continue
        ip = (pod.get("status") or {}).get("podIP")
        for c in pod.get("spec", {}).get("containers") or []:
            for p in c.get("ports") or []:
                if p.get("name") == "progress" and ip:
                    return ip, int(p["containerPort"])
    return None
