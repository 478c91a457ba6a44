"""``tabjob run FILE [--output-dir DIR] [--devices ...]``: the same job on this machine, under real torchrun.

Validates and plans exactly as the operator does, writes the spec and plan, starts ``torchrun --standalone
--nproc-per-node=<worldSize> -m tabjob_trainer`` (real processes, one gloo process group; a one-rank plan
runs the trainer entry point directly, as there is no group to form), shows a progress bar
from the trainer's progress stream and ends with the leaderboard. Running it again on the same output directory
resumes: finished fits are loaded, not fitted again. This module never imports torch or lightgbm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as ProgressBar
from rich.table import Table

from tabjob.api import TabularJob, load_manifest, to_manifest
from tabjob.cli.devices import DeviceError, parse_devices
from tabjob.contracts import pod
from tabjob.contracts.plan import Plan
from tabjob.contracts.results import PROGRESS_FILE, parse_events
from tabjob.planner import plan_job


class RunError(Exception):
    """A one-line reason the run cannot start or failed."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="run a TabularJob on this machine through torchrun (no cluster)")
    p.add_argument("file", metavar="FILE", help="TabularJob manifest")
    p.add_argument("--output-dir", "-o", help="results directory (default runs/<metadata.name>); rerun to resume")
    p.add_argument("--devices", help="GPUs to use, in Lightning's forms: 2, '1,3', -1, auto (default auto)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar, only the leaderboard")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = Console(width=None if sys.stdout.isatty() else 140)
    job = load_manifest(args.file)
    plan = plan_job(job)
    out = Path(args.output_dir or Path("runs") / job.metadata.name)
    try:
        env = _environment(plan, args.devices)
        _check_output_dir(out)
        _prepare_output(out, job, plan)
    except (RunError, DeviceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rc = _launch(out, plan, env, console, quiet=args.quiet)
    error = out / "error.json"
    if rc != 0:
        if error.exists():
            print(f"error: {json.loads(error.read_text())['error']}", file=sys.stderr)
        else:
            print(f"error: the trainer exited with status {rc}; its log: {out / 'trainer.log'}", file=sys.stderr)
            _tail(out / "trainer.log")
        if not (out / "leaderboard.json").exists():
            return rc or 1
    board = out / "leaderboard.json"
    if board.exists():
        print_leaderboard(json.loads(board.read_text()), console, title=f"Leaderboard ({out})")
    return rc


def visible_gpus() -> int:
    """Count GPUs without importing torch: nvidia-smi where present, honouring CUDA_VISIBLE_DEVICES."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


_ANY_VISIBLE = (None, "auto", "-1")  # forms that take whatever GPUs this machine has, none included


def _environment(plan: Plan, devices: str | None) -> dict[str, str]:
    env = dict(os.environ)
    need = sum(p.gpus for p in plan.pods)
    chosen_any = devices is None or devices.strip() in _ANY_VISIBLE
    if need == 0:
        if not chosen_any:
            raise RunError(f"--devices {devices!r} was given but the plan uses no GPU (spec.resources.gpus is 0)")
        return env
    visible = visible_gpus()
    if visible < need and chosen_any:
        if plan.on_gpu_unavailable == "FallbackToCPU":
            # Each fit records its fallback on the leaderboard; nothing falls back silently.
            return env
        raise RunError(
            f"the plan needs {need} GPU(s) (one torchrun rank each) but {visible} visible on this machine; "
            "set spec.onGpuUnavailable: FallbackToCPU to train on the CPU"
        )
    chosen = parse_devices(devices if devices is not None else "auto", visible)
    if len(chosen) < need:
        raise RunError(f"--devices {devices!r} selects {len(chosen)} GPU(s) but the plan needs {need}")
    current = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    ids = [current[i] if current else str(i) for i in chosen[:need]]
    # Ranks see their GPUs as 0..n-1, the local indices the plan's devices use.
    env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
    return env


def _check_output_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise RunError(f"--output-dir {out}: is a file, not a directory; name a directory (it is created if missing)")
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise RunError(f"--output-dir {out}: {parent} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"--output-dir {out}: cannot create it ({exc.strerror or exc})") from None


def _prepare_output(out: Path, job: TabularJob, plan: Plan) -> None:
    out.mkdir(parents=True, exist_ok=True)
    plan_path = out / "plan.json"
    if plan_path.exists():
        try:
            previous = json.loads(plan_path.read_text())
        except ValueError:
            previous = {}  # cut short by a crash: not a plan this run can resume
        if not isinstance(previous, dict) or previous.get("fits") != plan.to_json_dict()["fits"]:
            raise RunError(
                f"{out} holds a run of a different plan; resume needs the same manifest "
                "(choose another --output-dir, or remove it)"
            )
    (out / "spec.json").write_text(json.dumps(to_manifest(job), indent=2))
    plan_path.write_text(plan.to_json())
    # Results of an earlier attempt are recomputed from the fits; a failed rerun must not show them as its own.
    for stale in ("leaderboard.json", "error.json", PROGRESS_FILE, "leaderboard.csv", "metrics.json", "models.json"):
        (out / stale).unlink(missing_ok=True)


def torchrun_command(out: Path, plan: Plan) -> list[str]:
    """torchrun for a group of ranks; a plan of one rank runs the same entry point directly.

    With a single rank there is no process group to form, and torchrun would only add an agent process that
    imports torch (seconds on a small machine) before the trainer starts.
    """
    trainer = [
        "-m",
        "tabjob_trainer",
        "--spec",
        str(out / "spec.json"),
        "--plan",
        str(out / "plan.json"),
        "--output",
        str(out),
    ]
    if plan.world_size == 1:
        return [sys.executable, *trainer]
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={plan.world_size}"]
    return [sys.executable, *launcher, *trainer]


def _launch(out: Path, plan: Plan, env: dict[str, str], console: Console, quiet: bool) -> int:
    env.setdefault(pod.UNBUFFERED.name, "1")
    if plan.world_size == 1:
        # Launched without torchrun: stale rank variables from a surrounding launcher must not leak in.
        for var in (pod.RANK, pod.WORLD_SIZE, pod.MASTER_ADDR, pod.MASTER_PORT, *pod.TORCHRUN_ENV):
            env.pop(var.name, None)
    with (out / "trainer.log").open("w") as log:
        proc = subprocess.Popen(
            torchrun_command(out, plan), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            if quiet:
                return proc.wait()
            return _watch(proc, out, len(plan.fits), console)
        except KeyboardInterrupt:
            proc.terminate()  # torchrun forwards the signal to its workers
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise


def _watch(proc: subprocess.Popen[bytes], out: Path, total: int, console: Console) -> int:
    path = out / PROGRESS_FILE
    offset, finished, failed = 0, 0, 0
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with ProgressBar(*columns, console=console, transient=False) as bar:
        task = bar.add_task("fits", total=total)
        while True:
            rc = proc.poll()
            if path.exists():
                with path.open() as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                complete = chunk[: chunk.rfind("\n") + 1]  # leave a half-written line for the next read
                offset += len(complete.encode())
                for event in parse_events(complete):
                    if event.event in ("FitEnded", "FitResumed"):
                        finished += 1
                        failed += event.state == "Failed"
                        bar.update(
                            task, completed=finished, description=f"fits ({failed} failed)" if failed else "fits"
                        )
                        if event.state in ("Failed", "Skipped"):
                            bar.console.print(f"[yellow]{event.fit} {event.state.lower()}:[/] {event.message}")
            if rc is not None:
                return rc
            time.sleep(0.3)


def _tail(path: Path, lines: int = 15) -> None:
    if path.exists():
        text = [line for line in path.read_text().splitlines() if not line.startswith(("W1", "*****"))]
        for line in text[-lines:]:
            print(f"  {line}", file=sys.stderr)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1e6 and value != int(value) else f"{value:g}"
    return str(value)


def print_leaderboard(rows: list[dict[str, Any]], console: Console, title: str = "Leaderboard") -> None:
    table = Table(title=title, title_justify="left")
    has_test = any("score_test" in r for r in rows)
    cols = (
        ["model", "score_val"]
        + (["score_test"] if has_test else [])
        + [
            "eval_metric",
            "fit_time",
            "pred_time_val",
            "predict_ms_per_1000_rows",
            "fit_order",
            "device",
            "gpus",
            "state",
        ]
    )
    for col in cols:
        table.add_column(col, justify="left" if col in ("model", "eval_metric", "device", "state") else "right")
    for r in rows:
        table.add_row(*(_fmt(r.get(c)) for c in cols))
    console.print(table)
    notes = [(r["model"], r["note"]) for r in rows if r.get("note")]
    for model, note in notes:
        console.print(f"[dim]{model}: {note}[/]")
