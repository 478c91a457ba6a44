"""Building blocks of the TabularJob API models: the strict base model, integers as JSON has them, the bounds.

Types are strict, as the API server's are: ``cpus: "2"``, ``cpus: true`` or ``suspend: "false"`` are refused,
never coerced, while ``2.0`` is 2 (as in JSON, which is what kubectl sends). Every bound here is also written into
the CRD, so validate and the API server refuse the same numbers.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel

_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|e[0-9]+)?$")
QUANTITY_PATTERN = _QUANTITY.pattern


class ApiModel(BaseModel):
    """camelCase on the wire, unknown fields refused, strict types, no NaN or Inf."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=True,
        strict=True,
        allow_inf_nan=False,
    )


def is_valid_gpu_amount(value: float) -> bool:
    """Whole GPUs, or a fraction 1/k that packs exactly onto one GPU."""
    if value < 0:
        return False
    if abs(value - round(value)) < 1e-9:
        return True
    if value > 1:
        return False
    k = 1.0 / value
    return abs(k - round(k)) < 1e-6


def parse_quantity(value: str) -> float:
    """A Kubernetes quantity (``64Gi``, ``500M``, ``1.5G``) in base units (bytes for memory)."""
    m = _QUANTITY.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a Kubernetes quantity such as 64Gi, 512Mi or 2G")
    number = float(m.group(1))
    suffix = m.group(3) or ""
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    decimal = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3, "": 1.0}
    if suffix in binary:
        return number * binary[suffix]
    if suffix.startswith("e"):
        return number * float(f"1e{suffix[1:]}")  # inf past float range, refused by the bounds
    return number * decimal[suffix]


def _whole_number(value: Any) -> Any:
    # kubectl sends YAML through JSON, where 2.0 is 2: a whole float is an integer to the API server too.
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


# An integer as the API server reads one: a number (never "2" or true), 2.0 counting as 2.
Int = Annotated[int, BeforeValidator(_whole_number)]

# Upper bounds keep every number inside what pods, the plan and the status can hold (the CRD carries them too).
MAX_CPUS = 16384
MAX_GPUS = 512
MAX_SECONDS = 315_360_000  # ten years
# The largest integer every JSON reader keeps exactly; the API server mangles bounds at int64's own extremes.
MAX_INT = 2**53 - 1
MAX_MEMORY = 2**50  # 1Pi
MAX_LIST = 64  # every list and map of the spec; the CRD's maxItems/maxProperties


def crd_string(regex: str, max_length: int) -> dict[str, Any]:
    """A string rule for the CRD only; the Python check gives the readable message."""
    return {"pattern": regex, "maxLength": max_length}
