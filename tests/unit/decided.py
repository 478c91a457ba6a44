"""`decide`, with every status it returns held to the resource's own model: the tables of decide tests use this.

TabularJobStatus (api/status.py) is what the CRD is generated from; a status the operator computes but the model does
not describe would be pruned or refused by the API server, so the check is strict: every key known, every value of the
declared type (the model ignores unknown keys on read, so they are looked for here).
"""

from __future__ import annotations

from typing import Any

from tabjob.api import TabularJobStatus
from tabjob.controller.policy.decide import decide as _decide
from tabjob.controller.policy.decision import Decision, Observed

_KNOWN = {field.alias or name for name, field in TabularJobStatus.model_fields.items()}


def check_status(status: dict[str, Any]) -> None:
    unknown = set(status) - _KNOWN
    assert not unknown, f"status keys TabularJobStatus does not declare: {sorted(unknown)}"
    TabularJobStatus.model_validate(status)


def decide(obs: Observed) -> Decision:
    d = _decide(obs)
    check_status(d.status)
    return d
