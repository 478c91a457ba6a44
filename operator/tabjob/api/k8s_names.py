"""Kubernetes' name rules (apimachinery's validation package), as pure checks with its own wording.

Each ``*_problem`` returns None for a valid value, else one line saying what is wrong and what would be valid.
The ``*_PATTERN`` strings are the same rules for the CRD (RE2 and Python ``re`` agree on them), so the API server
and ``tabjob validate`` refuse the same names.
"""

from __future__ import annotations

import re

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
DNS1123_LABEL_PATTERN = rf"^{_LABEL}$"
DNS1035_LABEL_PATTERN = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS1123_SUBDOMAIN_PATTERN = rf"^{_LABEL}(\.{_LABEL})*$"
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
QUALIFIED_NAME_PATTERN = rf"^({_LABEL}(\.{_LABEL})*/)?{_NAME}$"
LABEL_VALUE_PATTERN = rf"^({_NAME})?$"

QUALIFIED_NAME_MAX = 253 + 1 + 63
SUBDOMAIN_MAX = 253


def dns1123_label_problem(value: str) -> str | None:
    if len(value) > 63:
        return f"{value[:20]!r}... is {len(value)} characters; a DNS-1123 label has at most 63"
    if not re.match(DNS1123_LABEL_PATTERN, value):
        return (
            f"{value!r} is not a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a "
            "letter or digit (e.g. 'my-name')"
        )
    return None


def dns1035_label_problem(value: str, max_length: int = 63) -> str | None:
    if len(value) > max_length:
        return f"{value[:20]!r}... is {len(value)} characters; at most {max_length} are allowed"
    if not re.match(DNS1035_LABEL_PATTERN, value):
        return (
            f"{value!r} is not a DNS-1035 label (as a Service name must be): lowercase letters, digits and '-', "
            "starting with a letter and ending with a letter or digit (e.g. 'adult-gbm')"
        )
    return None


def dns1123_subdomain_problem(value: str) -> str | None:
    if len(value) > SUBDOMAIN_MAX:
        return f"{value[:20]!r}... is {len(value)} characters; a DNS-1123 subdomain has at most 253"
    if not re.match(DNS1123_SUBDOMAIN_PATTERN, value):
        return (
            f"{value!r} is not a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', each part starting "
            "and ending with a letter or digit (e.g. 'high-priority')"
        )
    return None


def qualified_name_problem(value: str) -> str | None:
    """A label or annotation key: an optional DNS-1123 subdomain prefix and '/', then a name of <= 63."""
    if value.count("/") > 1:
        return f"{value!r}: a qualified name holds at most one '/' (prefix/name, e.g. 'example.com/gpu')"
    prefix, _, name = value.rpartition("/")
    if "/" in value and not prefix:
        return f"{value!r}: the prefix before '/' must not be empty"
    if prefix and dns1123_subdomain_problem(prefix):
        return f"{value!r}: the prefix {prefix!r} must be a DNS-1123 subdomain (e.g. 'example.com')"
    if not name or len(name) > 63 or not re.match(rf"^{_NAME}$", name):
        return (
            f"{value!r} is not a qualified name: an optional DNS subdomain prefix and '/', then at most 63 "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit (e.g. 'example.com/gpu')"
        )
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not re.match(LABEL_VALUE_PATTERN, value):
        return (
            f"{value[:70]!r} is not a label value: empty, or at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None
