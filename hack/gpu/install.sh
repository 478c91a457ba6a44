#!/usr/bin/env bash
# Offline install for the GPU check: tabjob (built from this tree, so never stale) and the pure-Python packages
# in the wheel folder go into TARGET/site, which callers put on PYTHONPATH. Nothing is installed into the box's
# own Python environment and torch is never touched: pip sees only the wheel folder (--no-index), which holds no
# torch, and installs with --target, beside the box's packages instead of over them.
#   usage: hack/gpu/install.sh TARGET        (GPU_WHEELS: the folder, GPU_PYTHON: the box's Python)
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${1:?usage: hack/gpu/install.sh TARGET}
WHEELS=${GPU_WHEELS:-.gpu-wheels}
PY=${GPU_PYTHON:-python3}
say() { echo "gpu-check: $*" >&2; }

if [[ ! -d $WHEELS ]]; then
    say "no wheel folder $WHEELS: run 'make gpu-wheels' where PyPI is reachable, then bring $WHEELS along"
    exit 1
fi
tag=$($PY -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
if ! compgen -G "$WHEELS/pydantic_core-*-$tag-*.whl" >/dev/null; then
    say "$WHEELS has no wheels for this Python ($tag, $PY): run 'make gpu-wheels GPU_PYTHONS=<its version>'"
    exit 1
fi
# The packages a GPU box brings itself; pip cannot fetch them here, so name what is missing up front.
missing=$($PY - <<'PY'
import importlib.util
need = {"torch": "torch", "numpy": "numpy", "pandas": "pandas", "pyarrow": "pyarrow", "scipy": "scipy",
        "sklearn": "scikit-learn", "matplotlib": "matplotlib"}
print(" ".join(pkg for mod, pkg in need.items() if importlib.util.find_spec(mod) is None))
PY
)
if [[ -n $missing ]]; then
    say "$PY lacks $missing; a GPU box is expected to have them (install them, or carry their wheels in $WHEELS)"
    exit 1
fi

rm -rf "$target/site" "$target/src"
mkdir -p "$target/src"
# Built from a copy: setuptools builds in the source tree and reuses its build/ folder, which could carry files
# that are gone from the checkout into the wheel.
cp -R pyproject.toml README.md operator trainer "$target/src/"
# One resolve: tabjob's own requirements and the test runner, all from the folder. --no-index also reaches the
# isolated build of tabjob's wheel, which takes setuptools and wheel from the folder.
$PY -m pip install -q --disable-pip-version-check --no-index --find-links "$WHEELS" --no-compile \
    --target "$target/site" -r hack/gpu/requirements.txt "$target/src"
# TABM's modules without their torch requirement: the box's torch is on the path already.
$PY -m pip install -q --disable-pip-version-check --no-index --find-links "$WHEELS" --no-compile --no-deps \
    --target "$target/site.tabm" tabm rtdl_num_embeddings
cp -R "$target/site.tabm/." "$target/site/" && rm -rf "$target/site.tabm"
if compgen -G "$target/site/torch*" >/dev/null; then
    say "torch was installed into $target/site; the box's own torch must never be replaced"
    exit 1
fi
PYTHONPATH="$target/site${PYTHONPATH:+:$PYTHONPATH}" $PY -c 'import tabjob, tabjob_trainer, pydantic, pytest'
say "installed tabjob and its pure-Python requirements into $target/site (offline, from $WHEELS)"
