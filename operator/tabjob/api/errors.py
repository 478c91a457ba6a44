"""Errors a user can act on: every problem names the field path and what would be valid."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any


class SpecError(ValueError):
    """One or more problems with a TabularJob manifest.

    ``problems`` holds ``(field_path, message)`` pairs such as
    ``("spec.resources.gpus", "0.3 is not a whole number or a fraction that divides one GPU")``.
    """

    def __init__(self, problems: Iterable[tuple[str, str]]) -> None:
        self.problems: list[tuple[str, str]] = list(problems)
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in self.problems))

    @classmethod
    def at(cls, path: str, message: str) -> SpecError:
        return cls([(path, message)])

    def lines(self) -> list[str]:
        return [f"{path}: {msg}" for path, msg in self.problems]


def field_path(loc: Sequence[Any], prefix: str = "") -> str:
    """Render a pydantic error location as ``spec.scheduling.tolerations[1].key``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not str(part) or not str(part).isprintable() or " " in str(part):
            out += f"[{json.dumps(str(part))}]"  # a key with spaces or a newline must not break the one line
        else:
            out = f"{out}.{part}" if out else str(part)
    return out or "(document)"
