"""LightGBM's library loaded when the process starts (``LD_PRELOAD``), by the trainer's entries re-executing
themselves once, before any other import.

A LightGBM 4.7 compiled with CUDA on a GPU box (CUDA 13.0, beside PyTorch 2.11) died with SIGSEGV in a process
that loaded its library with ``dlopen`` after numpy, on the CPU learner too, and in the pod's own entry
(``torchrun ... -m tabjob_trainer``) even with ``import lightgbm`` as its first heavy import; every process that had
the library in ``LD_PRELOAD`` trained, on both devices. Preloading changes nothing for a LightGBM that works either
way (the pip wheels), so the entries always do it where the library is found; ``TABJOB_LIGHTGBM_PRELOAD=0`` turns it
off. The library is found without importing lightgbm, so nothing heavy is loaded before the exec.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from tabjob.contracts import pod

SWITCH = pod.LIGHTGBM_PRELOAD.name
LIBRARY = "lib_lightgbm.so"  # Linux's name: LD_PRELOAD is the Linux loader's, and pods run Linux


def library() -> Path | None:
    """lightgbm's shared library as its package ships it, found without importing the package."""
    spec = importlib.util.find_spec("lightgbm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(folder) / "lib" / LIBRARY
        if lib.is_file():
            return lib
    return None


def preloaded_environment(environ: Mapping[str, str], lib: Path | None) -> dict[str, str] | None:
    """The environment to run again with, the library first in LD_PRELOAD; None where it is already there, there
    is none, or the switch is off."""
    if lib is None or environ.get(SWITCH, "1") == "0":
        return None
    current = environ.get("LD_PRELOAD", "")
    # The loader splits LD_PRELOAD on colons and spaces.
    if str(lib) in current.replace(":", " ").split():
        return None
    return {**environ, "LD_PRELOAD": f"{lib}:{current}" if current else str(lib)}


def run_again_with_lightgbm_preloaded() -> None:
    """Replace this process (same PID, so torchrun still watches it; same command line) with one that has
    LightGBM's library preloaded; returns only where nothing is to be done."""
    env = preloaded_environment(os.environ, library())
    if env is None:
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execve(sys.executable, sys.orig_argv, env)
