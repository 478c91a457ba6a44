"""kstatus conditions (Ready, Reconciling, Stalled) plus one per phase, from a phase, a reason and a message."""

from __future__ import annotations

from typing import Any


def _condition(
    old: dict[str, dict[str, Any]], ctype: str, status: bool, reason: str, message: str, now: str, generation: int
) -> dict[str, Any]:
    value = "True" if status else "False"
    prev = old.get(ctype)
    # lastTransitionTime moves only when the status flips, as kstatus and kubectl wait expect.
    ltt = prev["lastTransitionTime"] if prev and prev.get("status") == value and prev.get("lastTransitionTime") else now
    return {
        "type": ctype,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": ltt,
        "observedGeneration": generation,
    }


condition = _condition  # one condition with kstatus' lastTransitionTime rule (admission.py's Admitted)


def conditions_for(
    phase: str, reason: str, message: str, stalled: bool, old: list[dict[str, Any]], now: str, generation: int
) -> list[dict[str, Any]]:
    prev = {c["type"]: c for c in old if isinstance(c, dict) and "type" in c}
    in_progress = phase in ("Pending", "Running")

    def cond(ctype: str, value: bool, why: str, msg: str = "") -> dict[str, Any]:
        return _condition(prev, ctype, value, why, msg, now, generation)

    def only(match: str, msg: str = "") -> tuple[bool, str, str]:
        return (phase == match, reason if phase == match else phase, msg if phase == match else "")

    stuck = stalled or phase == "Failed"
    return [
        cond("Ready", phase == "Succeeded", reason, message),
        cond("Reconciling", in_progress, reason if in_progress else phase, message if in_progress else ""),
        cond("Stalled", stuck, reason if stuck else phase, message if stuck else ""),
        cond("Running", *only("Running", message)),
        cond("Succeeded", *only("Succeeded", message)),
        cond("Failed", *only("Failed", message)),
        cond("Suspended", *only("Suspended", message)),
    ]


def reason_of(status: dict[str, Any], ctype: str) -> str:
    for c in status.get("conditions") or []:
        if c.get("type") == ctype:
            return str(c.get("reason") or ctype)
    return ctype
