"""``tabjob export --format mlserver``: a finished run as an MLServer model repository that ``mlserver start`` serves.

The directory holds exactly what inference needs and nothing else: ``preprocessing.json``, ``models.json`` and
``leaderboard.json`` narrowed to the served model (and its ensemble members), and each of their fits as the model
family itself saves it (LightGBM's ``model.txt``, the MLP's ``model.pt``). Out-of-fold predictions, fit records and
progress logs stay behind. Beside them, ``model-settings.json`` (the tabjob runtime, the V2 metadata) and
``settings.json`` (``parallel_workers: 0``: MLServer 1.7.1's parallel inference pool crashes at start, "There is no
current event loop in thread 'MainThread'"; the runtime predicts in threads instead).

The export is written to a temporary sibling and renamed into place, so a reader never sees half of one, and an
earlier export at the same place is replaced; any other non-empty directory is refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from tabjob_trainer import __version__, store
from tabjob_trainer.durable import fsync_dir, write_json
from tabjob_trainer.errors import DataError
from tabjob_trainer.predictor import Predictor, RunFiles
from tabjob_trainer.serving.schema import Tensor, input_metadata, output_metadata

RUNTIME = "tabjob_trainer.serving.runtime.TabjobRuntime"
EXPORT_DIR = "mlserver"  # where spec.export writes the export inside the job's output
MODEL_SETTINGS = "model-settings.json"
SERVER_SETTINGS = "settings.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def default_name(run_dir: Path) -> str:
    """The job's name (``spec.json``'s ``metadata.name``, written by `tabjob run`), else the directory's name."""
    try:
        doc = json.loads((run_dir / "spec.json").read_text())
        name = doc["metadata"]["name"]
        if isinstance(name, str) and _NAME.match(name):
            return name
    except (OSError, ValueError, KeyError, TypeError):
        pass
    fallback = re.sub(r"[^A-Za-z0-9._-]", "-", run_dir.resolve().name).strip("-._") or "model"
    return fallback[:253]


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise DataError(
            f"--name {name!r}: use letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(it is the model's name in /v2/models/NAME)"
        )
    return name


def _tensors(tensors: list[Tensor]) -> list[dict[str, Any]]:
    return [{"name": t.name, "datatype": t.datatype, "shape": t.shape} for t in tensors]


def model_settings(files: RunFiles, name: str, model: str, uri: str) -> dict[str, Any]:
    """MLServer's model-settings.json for serving ``model`` of the run at ``uri``."""
    return {
        "name": name,
        "implementation": RUNTIME,
        "platform": "tabjob",
        "versions": [f"tabjob/{__version__}"],
        "inputs": _tensors(input_metadata(files.pre)),
        "outputs": _tensors(output_metadata(files.label, files.output_columns())),
        "parameters": {"uri": uri, "content_type": "pd", "extra": {"model": model}},
    }


def server_settings(**extra: Any) -> dict[str, Any]:
    return {"parallel_workers": 0, **extra}


def write_mlserver(run_dir: str | Path, output: str | Path, name: str | None = None, model: str | None = None) -> Path:
    """Write the export of ``model`` (the best by default) to ``output``; returns the directory written."""
    run, target = Path(run_dir), Path(output)
    _check_target(target)
    predictor = Predictor.load(run, model)  # loading every fit also proves the export will load
    files = predictor.files
    needed = files.models_needed(predictor.model)
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write_json(tmp / "preprocessing.json", files.preprocessing)
        write_json(tmp / "models.json", {m: files.index[m] for m in needed})
        write_json(tmp / "leaderboard.json", [r for r in files.leaderboard if r.get("model") in needed])
        for fit_id, fitted in predictor.fits.items():
            directory = store.fit_dir(tmp, fit_id)
            directory.mkdir(parents=True)
            fitted.save(directory)
        settings = model_settings(files, check_name(name or default_name(run)), predictor.model, ".")
        write_json(tmp / MODEL_SETTINGS, settings)
        write_json(tmp / SERVER_SETTINGS, server_settings())
        fsync_dir(tmp)
        if target.exists():
            shutil.rmtree(target)  # an earlier export (checked above)
        os.rename(tmp, target)
        fsync_dir(target.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise DataError(f"--output {target}: is a file; name a directory for the model repository")
    if not target.parent.is_dir():
        raise DataError(f"--output {target}: directory {target.parent} does not exist")
    if target.is_dir() and any(target.iterdir()):
        previous = target / MODEL_SETTINGS
        try:
            ours = json.loads(previous.read_text()).get("implementation") == RUNTIME
        except (OSError, ValueError, AttributeError):
            ours = False
        if not ours:
            raise DataError(f"--output {target}: is not empty and not an earlier tabjob export; name a new directory")
