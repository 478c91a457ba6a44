"""The trainer's entries run again with LightGBM's library preloaded (preload.py): the environment they exec with,
and a real exec, seen from inside the new process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tabjob_trainer import preload

LIB = Path("/site/lightgbm/lib/lib_lightgbm.so")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, str(LIB)),
        ({"LD_PRELOAD": "/usr/lib/libfoo.so"}, f"{LIB}:/usr/lib/libfoo.so"),
        ({"LD_PRELOAD": f"/usr/lib/libfoo.so:{LIB}"}, None),  # already there, wherever in the list
        ({"LD_PRELOAD": f"/usr/lib/libfoo.so {LIB}"}, None),  # the loader also splits on spaces
        ({preload.SWITCH: "0"}, None),
        ({preload.SWITCH: "1"}, str(LIB)),
    ],
)
def test_the_environment_to_run_again_with(environ: dict[str, str], expected: str | None) -> None:
    env = preload.preloaded_environment({"PATH": "/bin", **environ}, LIB)
    if expected is None:
        assert env is None
    else:
        assert env is not None and env["LD_PRELOAD"] == expected and env["PATH"] == "/bin"


def test_without_a_lightgbm_library_nothing_is_run_again() -> None:
    assert preload.preloaded_environment({}, None) is None


def test_the_library_is_found_without_importing_lightgbm() -> None:
    probe = (
        "import sys; from tabjob_trainer.preload import library; lib = library(); "
        "print(lib); print('lightgbm' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].endswith("/lightgbm/lib/lib_lightgbm.so") and Path(out[0]).is_file()
    assert out[1] == "False False"


SEEN_FROM_INSIDE = """
import os, sys
from tabjob_trainer.preload import run_again_with_lightgbm_preloaded
print("start", os.getpid(), flush=True)
run_again_with_lightgbm_preloaded()
maps = open("/proc/self/maps").read()
print("after", os.getpid(), os.environ.get("LD_PRELOAD", ""), "lib_lightgbm.so" in maps, sys.argv[1:])
"""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps (Linux)")
@pytest.mark.parametrize("switch", ["1", "0"])
def test_the_process_runs_again_with_the_library_mapped_same_pid_same_arguments(switch: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env[preload.SWITCH] = switch
    result = subprocess.run(
        [sys.executable, "-c", SEEN_FROM_INSIDE, "--spec", "a b"], capture_output=True, text=True, env=env, check=True
    )
    lines = result.stdout.splitlines()
    starts = [line for line in lines if line.startswith("start")]
    (after,) = [line for line in lines if line.startswith("after")]
    pid = starts[0].split()[1]
    if switch == "1":
        # printed once before the exec and once in the new process, which has the same PID
        assert len(starts) == 2 and starts[1].split()[1] == pid
        assert after.split()[1] == pid and after.split()[2].endswith("lib_lightgbm.so")
        assert after.endswith("True ['--spec', 'a b']"), after
    else:
        assert len(starts) == 1 and after.split()[2] == "False", after  # no LD_PRELOAD, lightgbm never loaded


HEAVY = ("numpy", "pandas", "pyarrow", "lightgbm", "torch", "sklearn")


@pytest.mark.parametrize("entry", ["tabjob_trainer.__main__", "tabjob_trainer.scoring.__main__"])
def test_an_entry_loads_nothing_heavy_before_it_runs_again(entry: str) -> None:
    # What `python -m ENTRY` has loaded when its `if __name__ == "__main__"` block starts: the package's __init__ and
    # the entry's own imports. A heavy module there would load twice per pod, once on each side of the exec.
    probe = f"import importlib, sys; importlib.import_module({entry!r}); print(sorted(set({HEAVY}) & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"{entry} loads {out.strip()} before the exec"
