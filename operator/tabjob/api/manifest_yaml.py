"""Reading manifests as kubectl does, and refusing what kubectl and the API server would refuse.

kubectl parses YAML with go-yaml (YAML 1.1) and sends JSON. So, to judge a file as the API server would:

- ``1e20`` is a number (PyYAML alone reads it as a string), ``y`` and ``n`` are booleans as ``yes`` and ``no`` are
  (YAML 1.1: ``label: y`` reaches the API server as ``true``), and ``2024-01-01`` stays a string (no dates);
- a key given twice is an error (kubectl refuses it) rather than the last one silently winning;
- a document must be JSON: no NaN or infinities, no binary or set values, keys that are strings;
- the file must be UTF-8 text, and aliases must not expand into a huge document (a "billion laughs" file).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from tabjob.api.errors import SpecError, field_path

MAX_FILE_BYTES = 3 * 2**20  # the API server refuses larger requests
MAX_NODES = 200_000  # values in one document once aliases are expanded
MAX_DEPTH = 64  # nesting; no TabularJob needs more than a dozen levels

# go-yaml's float syntax, which also covers 1e20 (PyYAML's YAML 1.1 resolver insists on a dot).
_GO_FLOAT = re.compile(
    r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"
)
# YAML 1.1 integers without the base-60 form (1:30), which go-yaml reads as a string.
_GO_INT = re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$")
_REPLACED = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


class _KubectlLoader(yaml.SafeLoader):
    """SafeLoader with go-yaml's scalars and duplicate keys refused."""

    bool_values = {**yaml.SafeLoader.bool_values, "y": True, "n": False}

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in _REPLACED]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {seen[key] + 1}); kubectl would silently keep the last one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_KubectlLoader.add_implicit_resolver("tag:yaml.org,2002:int", _GO_INT, list("-+0123456789"))
_KubectlLoader.add_implicit_resolver("tag:yaml.org,2002:float", _GO_FLOAT, list("-+.0123456789"))
_KubectlLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


def read_text(path: str | Path) -> str:
    """The file as UTF-8 text; a binary or non-UTF-8 file is one line saying so."""
    where = str(path)
    try:
        size = Path(path).stat().st_size
        if size > MAX_FILE_BYTES:
            raise SpecError.at(where, f"the file is {size} bytes; the API server accepts at most {MAX_FILE_BYTES}")
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError.at(where, f"cannot read the file: {exc.strerror or exc}") from None
    if b"\x00" in raw:
        raise SpecError.at(where, "a binary file (it holds NUL bytes), not a YAML manifest")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError.at(
            where, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save the manifest as UTF-8"
        ) from None


def parse_yaml(text: str, where: str, loader: type[yaml.SafeLoader] | None = None) -> list[Any]:
    """Every document of a YAML stream, read as kubectl reads it (or by ``loader``, for files Python writes)."""
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader or _KubectlLoader) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise SpecError.at(where, f"not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise SpecError.at(where, f"not valid YAML: nested deeper than {MAX_DEPTH} levels") from None
    return docs


def json_problems(doc: Any) -> list[tuple[str, str]]:
    """What keeps a document from being the JSON kubectl sends: non-finite numbers, non-JSON values, huge expansions.

    Iterative, with a budget on visited values, so a file of nested aliases cannot make this walk explode.
    """
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, list[Any]]] = [(doc, [])]
    visited = 0
    while stack:
        node, loc = stack.pop()
        visited += 1
        if visited > MAX_NODES:
            return [("(document)", f"more than {MAX_NODES} values once YAML aliases are expanded; write it out")]
        if len(loc) > MAX_DEPTH:
            return [(field_path(loc[:6]) + "...", f"nested deeper than {MAX_DEPTH} levels")]
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    problems.append((field_path([*loc, str(key)]), f"the key {key!r} is not a string; quote it"))
                    continue
                stack.append((value, [*loc, key]))
        elif isinstance(node, list):
            stack.extend((value, [*loc, i]) for i, value in enumerate(node))
        elif isinstance(node, float) and not math.isfinite(node):
            problems.append(
                (field_path(loc), f"{node} is not a finite number; JSON and the API server have no NaN or Inf")
            )
        elif node is not None and not isinstance(node, str | int | float | bool):
            problems.append((field_path(loc), f"a YAML {type(node).__name__} value is not JSON; quote it as a string"))
    return sorted(problems)


class KubectlDumper(yaml.SafeDumper):
    """SafeDumper that quotes every string kubectl would read as something else (``y``, ``n``, ``1e20``)."""

    yaml_implicit_resolvers = _KubectlLoader.yaml_implicit_resolvers


def dump_yaml(data: Any, **options: Any) -> str:
    """YAML for kubectl: what it parses back is ``data``, string for string."""
    return yaml.dump(data, Dumper=KubectlDumper, **options)
