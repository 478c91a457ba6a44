"""``tabjob from-autogluon FILE``: an AutoGluon fit() keyword set (JSON or YAML) as a TabularJob manifest."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from tabjob.api import parse_manifest
from tabjob.api.errors import SpecError
from tabjob.api.manifest_yaml import dump_yaml, parse_yaml, read_text
from tabjob.cli.autogluon import convert


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "from-autogluon", help="convert AutoGluon fit() arguments (JSON/YAML) into a TabularJob manifest"
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--name", default="from-autogluon", help="metadata.name of the manifest")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # JSON is YAML, so one loader reads both; fit() arguments come from Python, so Python's YAML reads them.
    docs = parse_yaml(read_text(args.file), args.file, loader=yaml.SafeLoader)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise SpecError.at(args.file, "expected one mapping of AutoGluon fit() keyword arguments")
    manifest, notes = convert(docs[0], name=args.name)
    parse_manifest(manifest)  # what we print must be a valid TabularJob
    for note in notes:
        print(f"# not carried over: {note}", file=sys.stderr)
    print(dump_yaml(manifest, sort_keys=False), end="")
    return 0
