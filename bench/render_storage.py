"""Render the Object storage section of BENCHMARKS.md from bench/results/s3_read.json (``python -m bench.s3_read``).

``--write`` puts it into BENCHMARKS.md between its markers (appended the first time); without it, it is printed.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from bench.common import RESULTS
from bench.sections import render_main

BEGIN = "<!-- storage-section:begin (python -m bench.render_storage --write) -->"
END = "<!-- storage-section:end -->"
GOAL = 0.7  # S3 through tabjob's reader / local disk through pyarrow

ROWS = [
    ("local_pyarrow", "local disk, `pyarrow.parquet.read_table` (baseline)"),
    ("local_tabjob", "local disk, tabjob's reader"),
    ("s3_native_tabjob", "S3, tabjob's reader over pyarrow's S3FileSystem (**the one used**)"),
    ("s3_native_checksums_tabjob", "the same, with the AWS SDK's default response checksums"),
    ("s3_s3fs_tabjob", "S3, tabjob's reader over s3fs"),
    ("s3_native_pyarrow", "S3, `pyarrow.parquet.read_table` over pyarrow's S3FileSystem"),
    ("s3_s3fs_pyarrow", "S3, `pyarrow.parquet.read_table` over s3fs"),
]


def _verdict(ratio: float) -> str:
    return "met" if ratio >= GOAL else f"**missed** by {GOAL - ratio:.2f}"


def render() -> str:
    path = RESULTS / "s3_read.json"
    if not path.exists():
        return "## Object storage\n\nNo run recorded yet: `python -m bench.s3_read`.\n"
    r: dict[str, Any] = json.loads(path.read_text())
    d = r["dataset"]
    before, after = r["load_average_before"], r["load_average_1m_5m_15m"]
    best, median = r["ratio_to_local_best"], r["ratio_to_local_median"]
    out = [
        "## Object storage",
        "",
        f"`bench/s3_read.py` ({r['when']}, {r['cpus']} cores, load average {before[0]} (1 min) / {before[1]} (5 min) "
        f"before, {after[0]} / {after[1]} after; pyarrow {r['pyarrow']}): a Parquet dataset of {d['files']} files, "
        f"{d['rows']:,} rows, {d['columns']} numeric and string columns, {d['row_groups_per_file']} row groups a "
        f"file, {d['stored_bytes'] / 1e9:.2f} GB stored ({d['uncompressed_bytes'] / 1e9:.2f} GB uncompressed), "
        "read whole into one Arrow table, from local disk and from a SeaweedFS S3 server on the same machine "
        f"({r['server']}). {r['rounds']} alternating rounds after a warm-up round, so both sides read from memory "
        "(the page cache, and the server's); MB/s are bytes stored over wall seconds, listing and footers included.",
        "",
        "| reader | best MB/s | median MB/s | vs local, best | vs local, median | CPU s here | CPU s in the server |",
        "|---|---|---|---|---|---|---|",
    ]
    here, server = r["client_cpu_seconds"], r["server_cpu_seconds"]
    for key, label in ROWS:
        out.append(
            f"| {label} | {r['mb_per_s_best'][key]:,.0f} | {r['mb_per_s_median'][key]:,.0f} | {best[key]:.2f}x | "
            f"{median[key]:.2f}x | {statistics.median(here[key]):.2f} | {statistics.median(server[key]):.2f} |"
        )
    ratio = best["s3_native_tabjob"]
    s3_cpu = statistics.median(here["s3_native_tabjob"]) + statistics.median(server["s3_native_tabjob"])
    local_cpu = statistics.median(here["local_pyarrow"])
    out += [
        "",
        f"S3 through tabjob's reader against local disk: **{ratio:.2f}x** (goal >= {GOAL}x): {_verdict(ratio)}; "
        f"median {median['s3_native_tabjob']:.2f}x. pyarrow's native S3 reader against s3fs under the same reader: "
        f"**{r['mb_per_s_best']['s3_native_tabjob'] / r['mb_per_s_best']['s3_s3fs_tabjob']:.2f}x** the throughput. "
        "CPU seconds are medians per read of the whole dataset.",
        "",
        f"Why the goal is out of reach here: every read is bound by the {r['cpus']} cores, and the server shares "
        f"them. Reading from local disk cost {local_cpu:.1f} CPU seconds; reading from S3 cost {s3_cpu:.1f}: "
        f"{statistics.median(here['s3_native_tabjob']):.1f} here, receiving and decoding, and "
        f"{statistics.median(server['s3_native_tabjob']):.1f} in SeaweedFS, serving the bytes. Even if both kept "
        f"every core busy the whole time, S3 could reach about **{local_cpu / s3_cpu:.2f}x** on this machine. "
        "Against a store on other machines, as in a cluster, the server's share goes elsewhere and the reader's "
        f"own cost is what counts: {statistics.median(here['s3_native_tabjob']):.1f} CPU seconds against "
        f"{local_cpu:.1f} from local disk.",
        "",
    ]
    return "\n".join(out + _run_lines())


def _run_lines() -> list[str]:
    """The run side (bench/s3_run.py): the copy to the bucket beside the fits it follows."""
    path = RESULTS / "s3_run.json"
    if not path.exists():
        return ["A run into the bucket: no figures yet (`python -m bench.s3_run`).", ""]
    r: dict[str, Any] = json.loads(path.read_text())
    local, bucket = r["runs"]["local"], r["runs"]["bucket"]
    wall_local = statistics.median(x["wall_seconds"] for x in local)
    wall_bucket = statistics.median(x["wall_seconds"] for x in bucket)
    fit = statistics.median(x["fit_seconds"] for x in bucket)
    copy = statistics.median(x["copy_seconds"] for x in bucket)
    mib = statistics.median(x["mib_copied"] for x in bucket)
    files = statistics.median(x["files"] for x in bucket)
    before = r["load_average_before"]
    return [
        "### A run into the bucket",
        "",
        f"`bench/s3_run.py` ({r['when']}, {r['cpus']} cores, load average {before[0]} (1 min) before): the same "
        f"`tabjob run` (GBM and XGB, 3 bagging folds, the MLServer export, {r['rows']:,} generated rows) into a "
        f"local directory and into `spec.output.uri` on the SeaweedFS server, {r['rounds']} alternating rounds, "
        "medians. The trainer copies each finished fit while the next trains, then the rest, and commits last.",
        "",
        "| run | wall s | fits' s | copied | copy s | wall vs local |",
        "|---|---|---|---|---|---|",
        f"| local directory (baseline) | {wall_local:.1f} | "
        f"{statistics.median(x['fit_seconds'] for x in local):.1f} | | | 1.00x |",
        f"| `spec.output.uri` on S3 | {wall_bucket:.1f} | {fit:.1f} | {files:.0f} files, {mib:.1f} MiB | "
        f"{copy:.1f} | {wall_bucket / wall_local:.2f}x |",
        "",
        f"Upload time beside fit time: **{copy:.1f} s** copying against **{fit:.1f} s** fitting "
        f"({copy / fit:.1%} of it; the copies of finished fits overlap the fits still training). The run's wall "
        f"time: {wall_bucket - wall_local:+.1f} s against the local run, which also counts opening the store, "
        "clearing an earlier attempt's commit marker and writing the marker last.",
        "",
    ]


if __name__ == "__main__":
    render_main(BEGIN, END, render)
