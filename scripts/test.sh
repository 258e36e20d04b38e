#!/usr/bin/env bash
# The test command (README): a virtual environment with everything the CPU suite needs, then pytest.
# Kernels run under Triton's interpreter; tests marked gpu are skipped (run them on a GPU with
# TILECOST_DEVICE=cuda python -m pytest -m gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch 2.13.0 is the CPU wheel this machine's pip finds locally (any other version downloads a CUDA build of
# several GB); the CPU suite needs torch only to run the kernels under the interpreter.
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,train,gpu]' 'torch==2.13.0'
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
