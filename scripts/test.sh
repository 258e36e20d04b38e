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
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,train,gpu,fast]' 'torch==2.13.0'
# tests/test_report.py checks `tilecost report`'s page in a real headless Chromium (Debian's package; playwright,
# from the dev extra, drives it). Installing it took 19 s here (apt-get update included); without root or
# apt-get, or offline, the test skips and says why.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
        || echo "scripts/test.sh: could not install chromium; the browser test will skip" >&2
fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
