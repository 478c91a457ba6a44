"""Object storage: reading a ~1 GB Parquet dataset from an S3 server against the same files on local disk.

The dataset (8 part files of numeric and string columns, several row groups each) is generated once under
~/.cache/tabjob/bench/s3_read/ (outside the repository) and uploaded to a SeaweedFS server (hack/s3/seaweed.py) the
script starts on this machine. Then, in alternating rounds so that load and cache warmth hit all alike, each reader
reads the whole dataset into one Arrow table:

- local, pyarrow: `pyarrow.parquet.read_table(directory)`, the baseline;
- local, tabjob: `storage.datasets` (`open_dataset` + `read`) on the same directory;
- S3, pyarrow native: tabjob's reader through pyarrow's own S3FileSystem (what `filesystem()` returns);
- the same with the AWS SDK's default response checksums (which `filesystem()` turns off, see filesystems.py);
- S3, s3fs: tabjob's reader through s3fs (fsspec, aiobotocore) wrapped as a pyarrow filesystem;
- and, for reference, `pyarrow.parquet.read_table` itself over each of the two S3 filesystems.

MB/s are the files' bytes as stored over the wall seconds of a read (listing and footers included). Each read also
records the CPU seconds it cost this process and the server's process: the server shares the machine's cores, so
what it burns serving the bytes is taken from the reader. Goal: S3 through tabjob's reader at >= 0.7x local. The
machine is shared: the script waits (up to --wait-minutes) for the 1-minute load average to fall below
--quiet-load before it measures, and records the load before and after.

    python -m bench.s3_read [--rounds 3] [--wait-minutes 20]
    python -m bench.render_storage --write
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from bench.envelope import envelope, write
from hack.s3.seaweed import SeaweedS3
from tabjob_trainer.storage import datasets, filesystems

SCRATCH = Path.home() / ".cache" / "tabjob" / "bench" / "s3_read"
FILES, ROWS_PER_FILE, ROW_GROUP = 8, 560_000, 140_000
FLOATS, INTS = 18, 4
BUCKET, PREFIX = "bench", "s3_read/data"


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def generate(directory: Path) -> int:
    """The dataset's part files (made once); their total size in bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    words = np.array([f"category-{i:04d}" for i in range(2_000)])
    for i in range(FILES):
        path = directory / f"part-{i:05d}.parquet"
        if path.exists():
            continue
        n = ROWS_PER_FILE
        columns: dict[str, Any] = {f"f{j}": rng.normal(size=n) for j in range(FLOATS)}
        columns |= {f"i{j}": rng.integers(0, 10**9, size=n) for j in range(INTS)}
        columns["cat"] = pa.array(words[rng.integers(0, len(words), size=n)])
        columns["tag"] = pa.array(np.char.mod("%016x", rng.integers(0, 2**62, size=n)))
        columns["label"] = rng.integers(0, 2, size=n)
        pq.write_table(pa.table(columns), path.with_suffix(".tmp"), row_group_size=ROW_GROUP)
        path.with_suffix(".tmp").rename(path)
    return sum(p.stat().st_size for p in directory.glob("*.parquet"))


def upload(directory: Path, uri: str) -> None:
    fs, root = filesystems.filesystem(uri)
    have = {i.base_name: i.size for i in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))}
    for path in sorted(directory.glob("*.parquet")):
        if have.get(path.name) == path.stat().st_size:
            continue
        with path.open("rb") as src, fs.open_output_stream(f"{root}/{path.name}") as out:
            while chunk := src.read(16 << 20):
                out.write(chunk)


def s3fs_filesystem() -> pafs.FileSystem:
    """s3fs as a pyarrow filesystem, with the same endpoint and keys, and its timeouts and retries bounded."""
    import s3fs

    fs = s3fs.S3FileSystem(
        endpoint_url=filesystems.s3_endpoint(),
        config_kwargs={
            "s3": {"addressing_style": "path"},
            "read_timeout": filesystems.timeout(),
            "connect_timeout": 5,
            "retries": {"mode": "standard", "total_max_attempts": filesystems.attempts()},
        },
    )
    fs.retries = 1  # botocore retries already: s3fs's own loop would multiply them
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))


@contextmanager
def reader_filesystem(fs: pafs.FileSystem) -> Iterator[None]:
    """tabjob's reader with `fs` for s3:// in place of the one filesystem() builds."""
    real = filesystems.filesystem

    def swapped(uri: str) -> tuple[pafs.FileSystem, str]:
        found, path = real(uri)
        return (fs, path) if uri.startswith("s3://") else (found, path)

    with mock.patch.object(datasets, "filesystem", swapped):
        yield


def tabjob_read(uri: str) -> pa.Table:
    return datasets.read(datasets.open_dataset(uri))


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (the server's, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    readers: dict[str, Callable[[], pa.Table]], rounds: int, rows: int, server_pid: int
) -> dict[str, dict[str, list[float]]]:
    """Per reader: wall, client CPU and server CPU seconds of each counted read."""
    out: dict[str, dict[str, list[float]]] = {n: {"wall": [], "client_cpu": [], "server_cpu": []} for n in readers}
    for r in range(rounds + 1):  # round 0 warms the page cache and the server's, and is not counted
        for name, fn in readers.items():
            cpu, server, started = own_cpu(), process_cpu(server_pid), time.perf_counter()
            table = fn()
            took = time.perf_counter() - started
            used, served = own_cpu() - cpu, process_cpu(server_pid) - server
            if table.num_rows != rows:
                raise RuntimeError(f"{name} read {table.num_rows} rows, not {rows}")
            del table
            if r:
                out[name]["wall"].append(took)
                out[name]["client_cpu"].append(used)
                out[name]["server_cpu"].append(served)
            print(f"round {r} {name}: {took:.2f} s, CPU {used:.2f} s here, {served:.2f} s in the server", flush=True)
    return out


def wait_for_quiet(threshold: float, minutes: float) -> list[float]:
    deadline = time.monotonic() + minutes * 60
    while load()[0] >= threshold and time.monotonic() < deadline:
        print(f"load {load()}: waiting for < {threshold}", flush=True)
        time.sleep(30)
    return load()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wait-minutes", type=float, default=20.0)
    parser.add_argument("--quiet-load", type=float, default=1.5)
    args = parser.parse_args()

    local = SCRATCH / "data"
    stored = generate(local)
    server = SeaweedS3.start(SCRATCH / "seaweedfs")
    try:
        server.make_bucket(BUCKET)
        os.environ.update(server.client_env())
        uri = f"s3://{BUCKET}/{PREFIX}"
        upload(local, uri)
        rows = FILES * ROWS_PER_FILE
        native = filesystems.filesystem(uri)[0]
        os.environ[filesystems.CHECKSUM_ENV] = "when_supported"  # the SDK's own default, for one reader
        checksummed = filesystems.filesystem(uri)[0]
        del os.environ[filesystems.CHECKSUM_ENV]
        via_s3fs = s3fs_filesystem()
        bucket_path = f"{BUCKET}/{PREFIX}"

        def through(fs: pafs.FileSystem) -> Callable[[], pa.Table]:
            def run() -> pa.Table:
                with reader_filesystem(fs):
                    return tabjob_read(uri)

            return run

        readers: dict[str, Callable[[], pa.Table]] = {
            "local_pyarrow": lambda: pq.read_table(str(local)),
            "local_tabjob": lambda: tabjob_read(str(local)),
            "s3_native_tabjob": lambda: tabjob_read(uri),
            "s3_native_checksums_tabjob": through(checksummed),
            "s3_s3fs_tabjob": through(via_s3fs),
            "s3_native_pyarrow": lambda: pq.read_table(bucket_path, filesystem=native),
            "s3_s3fs_pyarrow": lambda: pq.read_table(bucket_path, filesystem=via_s3fs),
        }
        before = wait_for_quiet(args.quiet_load, args.wait_minutes)
        print(f"load before: {before}", flush=True)
        measured = measure(readers, args.rounds, rows, server.pid)
        print(f"load after: {load()}", flush=True)
    finally:
        server.stop()
    dataset = datasets.open_dataset(str(local))
    mb = stored / 1e6
    seconds = {name: m["wall"] for name, m in measured.items()}
    best = {name: min(s) for name, s in seconds.items()}
    median = {name: statistics.median(s) for name, s in seconds.items()}
    result = {
        "load_average_before": before,
        "dataset": {
            "files": FILES,
            "rows": rows,
            "row_groups_per_file": len(dataset.files[0].row_groups),
            "columns": len(dataset.schema),
            "stored_bytes": stored,
            "uncompressed_bytes": dataset.uncompressed_bytes,
        },
        "server": "SeaweedFS (weed mini) on this machine, plain HTTP on loopback",
        "pyarrow": pa.__version__,
        "io_threads": pa.io_thread_count(),
        "rounds": args.rounds,
        "seconds": seconds,
        "client_cpu_seconds": {name: m["client_cpu"] for name, m in measured.items()},
        "server_cpu_seconds": {name: m["server_cpu"] for name, m in measured.items()},
        "mb_per_s_best": {name: mb / s for name, s in best.items()},
        "mb_per_s_median": {name: mb / s for name, s in median.items()},
        "ratio_to_local_best": {name: best["local_pyarrow"] / s for name, s in best.items()},
        "ratio_to_local_median": {name: median["local_pyarrow"] / s for name, s in median.items()},
    }
    write("s3_read", envelope("s3_read", result))


if __name__ == "__main__":
    main()
