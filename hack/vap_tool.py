"""hack/vap: a ValidatingAdmissionPolicy evaluated by k8s.io/apiserver's own plugin code (the test bed's release),
built once and cached by the digest of its sources, like the cluster's binaries (hack/cluster/build.sh).

    python -m hack.vap_tool        # build it if needed and print its path
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "hack" / "vap"
CACHE = Path(os.environ.get("TABJOB_CLUSTER_CACHE", Path.home() / ".cache" / "tabjob" / "cluster"))


def binary() -> Path:
    """The evaluator, built on first use (seconds when the cluster's build has warmed Go's cache)."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((SOURCE / name).read_bytes())
    exe = CACHE / f"vap-{digest.hexdigest()[:16]}" / "vap"
    if exe.exists():
        return exe
    if shutil.which("go") is None:
        raise RuntimeError("hack/vap needs Go (>= 1.25) to build, as the test cluster does")
    exe.parent.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".stage.", dir=exe.parent.parent))
    # The flags of the cluster's build (CGO off, -trimpath), so Go reuses the k8s.io packages it compiled there.
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": f"{os.environ.get('GOFLAGS', '')} -buildvcs=false".strip()}
    subprocess.run(["go", "build", "-trimpath", "-o", str(stage / "vap"), "."], cwd=SOURCE, env=env, check=True)
    stage.rename(exe.parent) if not exe.parent.exists() else shutil.rmtree(stage)
    return exe


def evaluate(policy: dict[str, Any], params: dict[str, Any] | None, requests: list[dict[str, Any]]) -> list[dict]:
    """[{"denied": [messages], "errors": [messages]}] for each request ({object, oldObject, namespace, operation})."""
    payload = json.dumps({"policy": policy, "params": params, "requests": requests})
    out = subprocess.run([str(binary())], input=payload, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"hack/vap failed ({out.returncode}): {out.stderr}")
    verdicts: list[dict] = json.loads(out.stdout)
    return verdicts


if __name__ == "__main__":
    print(binary())
