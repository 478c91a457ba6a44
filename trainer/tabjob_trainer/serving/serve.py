"""`tabjob serve RUN_DIR`: real MLServer on a run directory (or an export), in one command.

A small model repository is written to a temporary directory: ``settings.json`` (the ports, the host,
``parallel_workers: 0``) and ``model-settings.json`` whose ``uri`` is the run directory itself, so nothing is copied.
Then ``mlserver start`` runs in a child process that receives the signals this process gets (SIGTERM from the
kubelet, Ctrl-C), and the temporary directory is removed when it ends.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from tabjob_trainer.durable import write_json
from tabjob_trainer.errors import DataError
from tabjob_trainer.predictor import RunFiles
from tabjob_trainer.serving.export import MODEL_SETTINGS, SERVER_SETTINGS, check_name, default_name, model_settings
from tabjob_trainer.serving.export import server_settings as base_settings


@dataclass(frozen=True)
class Ports:
    http: int
    grpc: int
    metrics: int

    @classmethod
    def of(cls, http: int, grpc: int | None = None, metrics: int | None = None) -> Ports:
        ports = cls(http, http + 1 if grpc is None else grpc, http + 2 if metrics is None else metrics)
        for flag, value in (("--port", ports.http), ("--grpc-port", ports.grpc), ("--metrics-port", ports.metrics)):
            if not 1 <= value <= 65535:
                raise DataError(f"{flag} {value}: a port is a number from 1 to 65535")
        if len({ports.http, ports.grpc, ports.metrics}) < 3:
            raise DataError(f"ports {ports.http}, {ports.grpc} and {ports.metrics} must differ (HTTP, gRPC, metrics)")
        return ports


def write_repository(
    repo: Path, run_dir: Path, name: str | None, model: str | None, ports: Ports, host: str
) -> dict[str, object]:
    """Write the server's settings.json and the model's model-settings.json under ``repo``; returns the latter."""
    files = RunFiles.read(run_dir)
    chosen = model or files.best
    files.models_needed(chosen)  # an unknown model is refused here, before any server starts
    settings = model_settings(files, check_name(name or default_name(run_dir)), chosen, str(run_dir.resolve()))
    write_json(
        repo / SERVER_SETTINGS,
        base_settings(host=host, http_port=ports.http, grpc_port=ports.grpc, metrics_port=ports.metrics),
    )
    folder = repo / str(settings["name"])  # MLServer warns when the folder and the model are named differently
    folder.mkdir()
    write_json(folder / MODEL_SETTINGS, settings)
    return settings


def serve(run_dir: str | Path, name: str | None, model: str | None, ports: Ports, host: str) -> int:
    """Run MLServer until it exits or is stopped; returns its exit code."""
    repo = Path(tempfile.mkdtemp(prefix="tabjob-serve-"))
    try:
        settings = write_repository(repo, Path(run_dir), name, model, ports, host)
        print(
            f"serving {settings['name']} ({model or 'best model'}) from {run_dir}: "
            f"http://{host}:{ports.http}/v2/models/{settings['name']}/infer, gRPC {ports.grpc}, "
            f"metrics http://{host}:{ports.metrics}/metrics",
            flush=True,
        )
        code = "import sys; from mlserver.cli.main import main; sys.argv[0] = 'mlserver'; sys.exit(main())"
        child = subprocess.Popen([sys.executable, "-c", code, "start", str(repo)])

        def forward(signum: int, _frame: FrameType | None) -> None:
            child.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        return child.wait()
    finally:
        shutil.rmtree(repo, ignore_errors=True)
