"""docs/argocd-health.lua run for real under Lua 5.1 (the language version of Argo CD's gopher-lua), through
lupa, against sample TabularJob objects; and docs/gitops.md must carry the same script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

lua51 = pytest.importorskip("lupa.lua51", reason="lupa (dev extra) runs the Argo CD health check")

DOCS = Path(__file__).resolve().parents[2] / "docs"
SCRIPT = (DOCS / "argocd-health.lua").read_text()


def health(obj: dict[str, Any]) -> tuple[str, str]:
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    # Argo CD's sandbox offers no os/io/require; a script that leaned on them would fail there, so fail here too.
    for name in ("os", "io", "require", "dofile", "loadfile", "package", "debug"):
        lua.execute(f"{name} = nil")
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(SCRIPT)
    return str(result["status"]), str(result["message"])


def job(status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "adult", "namespace": "ml", "generation": generation},
    }
    if status is not None:
        obj["status"] = status
    return obj


def cond(ctype: str, status: str = "True", message: str = "") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": "X", "message": message}


@pytest.mark.parametrize(
    ("obj", "want", "message"),
    [
        (job(), "Progressing", "Waiting for the tabjob operator"),
        (
            job({"phase": "Pending", "observedGeneration": 1, "message": "creating 2 pods"}),
            "Progressing",
            "creating 2 pods",
        ),
        (
            job(
                {
                    "phase": "Running",
                    "observedGeneration": 1,
                    "progress": {"summary": "3/12"},
                    "conditions": [cond("Reconciling"), cond("Ready", "False")],
                }
            ),
            "Progressing",
            "Running: 3/12 fits done",
        ),
        (
            job(
                {
                    "phase": "Succeeded",
                    "observedGeneration": 1,
                    "bestModel": "WeightedEnsemble",
                    "score": 0.873,
                    "conditions": [cond("Ready"), cond("Succeeded")],
                }
            ),
            "Healthy",
            "Succeeded: best model WeightedEnsemble, score 0.873",
        ),
        (job({"phase": "Succeeded", "observedGeneration": 1}), "Healthy", "Succeeded"),
        (
            job(
                {
                    "phase": "Failed",
                    "observedGeneration": 1,
                    "conditions": [cond("Failed", message="rank 1 exited 137: OOMKilled"), cond("Stalled")],
                }
            ),
            "Degraded",
            "rank 1 exited 137: OOMKilled",
        ),
        (
            job(
                {
                    "phase": "Running",
                    "observedGeneration": 1,
                    "conditions": [cond("Stalled", message="no node has 8 nvidia.com/gpu")],
                }
            ),
            "Degraded",
            "no node has 8 nvidia.com/gpu",
        ),
        (
            job({"phase": "Failed", "observedGeneration": 1, "lastFailure": "backoffLimit 3 reached"}),
            "Degraded",
            "backoffLimit 3 reached",
        ),
        (job({"phase": "Suspended", "observedGeneration": 1}), "Suspended", "Suspended"),
        # A spec changed after the job succeeded: the old status must not read as the new spec's health.
        (job({"phase": "Succeeded", "observedGeneration": 1}, generation=2), "Progressing", "observe generation 2"),
        (job({"phase": "Archived", "observedGeneration": 1}), "Progressing", "Archived"),
        (job({"conditions": []}), "Progressing", "Waiting for the tabjob operator"),
    ],
    ids=[
        "no-status",
        "pending",
        "running",
        "succeeded",
        "succeeded-bare",
        "failed",
        "stalled",
        "failed-last",
        "suspended",
        "stale-generation",
        "unknown-phase",
        "empty-status",
    ],
)
def test_health(obj: dict[str, Any], want: str, message: str) -> None:
    status, msg = health(obj)
    assert status == want
    assert message in msg


def test_gitops_doc_embeds_this_script() -> None:
    doc = (DOCS / "gitops.md").read_text()
    indented = "\n".join(("    " + line) if line else "" for line in SCRIPT.rstrip("\n").splitlines())
    assert indented in doc, "docs/gitops.md's argocd-cm snippet differs from docs/argocd-health.lua"
